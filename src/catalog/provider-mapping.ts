import { z } from 'zod';
import { ownValue } from './own-value.js';

/**
 * Which provider runs a catalog model, and how a request's fields become that provider's input,
 * declared in the catalog entry so that adding a model is a file change:
 *
 *   "provider": {
 *     "name": "fal", "model": "fal-ai/flux/dev",
 *     "input": {
 *       "prompt":     { "from": "prompt" },
 *       "image_size": { "from": ["aspect_ratio", "resolution"],
 *                       "map": { "1:1,1K": "square_hd", "16:9,1K": "landscape_16_9", ... } },
 *       "image_url":  { "from": "images", "first": true },
 *       "num_images": { "value": 1 }
 *     }
 *   }
 *
 * Each provider input field is a constant (`value`) or is taken `from` the prompt, the reference
 * `images` (a list, or its first with `first`) or one or more of the entry's options. With `map`,
 * the value (for several sources: the values joined by commas) is looked up, and every value an
 * enum option can take must have its key. A field whose source is absent is left out.
 */

/** The providers a catalog entry can name. An entry without a `provider` block runs on `simulated`. */
export const providerNames = ['simulated', 'fal', 'replicate', 'openai'] as const;
export type ProviderName = (typeof providerNames)[number];

/** Sources that are not options: the prompt and the reference images. */
const requestSources = ['prompt', 'images'] as const;

type FieldMapping =
  | { value: unknown }
  | {
      from: string | string[];
      /** Our value (several: joined by commas) → the provider's value. */
      map?: Record<string, unknown>;
      /** For `images`: only the first URL, as a single value. */
      first?: boolean;
    };

/**
 * One object with the fields of both forms, told apart by which of `value` and `from` it has: as a
 * union of the two, a typing mistake in one form (`{ "from": "prompt", "frist": true }`) would be
 * reported as that object not being the other form.
 */
const fieldMapping = z
  .object({
    value: z.unknown(),
    from: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
    map: z.record(z.unknown()).optional(),
    first: z.boolean().optional(),
  })
  .strict()
  .superRefine((mapping, ctx) => {
    const constant = 'value' in mapping;
    if (constant === (mapping.from !== undefined))
      ctx.addIssue({
        code: 'custom',
        path: [],
        message: constant
          ? 'has both value and from: a field is a constant (value) or taken from a source (from)'
          : 'needs value (a constant) or from (prompt, images or options)',
      });
    else if (constant)
      for (const key of ['map', 'first'] as const)
        if (mapping[key] !== undefined)
          ctx.addIssue({ code: 'custom', path: [key], message: `${key} goes with from, not with value` });
  })
  .transform((mapping): FieldMapping => {
    if ('value' in mapping) return { value: mapping.value };
    const { from, map, first } = mapping;
    return { from: from!, ...(map ? { map } : {}), ...(first !== undefined ? { first } : {}) };
  });

export const providerBlockSchema = z
  .object({
    name: z.enum(providerNames),
    /** The provider's model id: `fal-ai/flux/dev`, `black-forest-labs/flux-schnell`, `gpt-image-1`. */
    model: z.string().min(1),
    /** Replicate: run this version (`POST /predictions` with `version`) instead of the model's latest. */
    version: z.string().min(1).optional(),
    /** The provider's input, field by field. */
    input: z.record(fieldMapping),
  })
  .strict();
type ProviderBlock = z.infer<typeof providerBlockSchema>;

/** What the mapping reads an option as: its type and, for enums, the values it can take. */
interface OptionShape {
  type: string;
  values?: ReadonlyArray<string | number>;
}

/** Problems in a provider block against the entry's options, as zod issues (path inside the block). */
export function providerBlockIssues(
  block: ProviderBlock,
  options: Record<string, OptionShape>,
): Array<{ path: Array<string | number>; message: string }> {
  const issues: Array<{ path: Array<string | number>; message: string }> = [];
  if (block.version !== undefined && block.name !== 'replicate')
    issues.push({ path: ['version'], message: 'only a replicate model has a version' });
  for (const [field, mapping] of Object.entries(block.input)) {
    if (!('from' in mapping)) continue;
    const sources = [mapping.from].flat();
    for (const [index, source] of sources.entries()) {
      if (!(requestSources as readonly string[]).includes(source) && !ownValue(options, source))
        issues.push({
          path: ['input', field, 'from', ...(Array.isArray(mapping.from) ? [index] : [])],
          message: `${source} is not an option of this model (nor prompt or images)`,
        });
    }
    if (mapping.first && !sources.includes('images'))
      issues.push({ path: ['input', field, 'first'], message: 'first applies to images only' });
    if (!mapping.map) continue;
    for (const key of combinations(sources.map((source) => valuesOf(ownValue(options, source))))) {
      if (key !== null && !Object.hasOwn(mapping.map, key))
        issues.push({
          path: ['input', field, 'map', key],
          message: `no value for ${describe(sources, key)}`,
        });
    }
  }
  return issues;
}

/**
 * The provider's input for one request: `options` are the resolved options (defaults applied),
 * `images` the reference image URLs the provider will fetch.
 */
export function buildProviderInput(
  block: ProviderBlock,
  request: { prompt: string; images: string[]; options: Record<string, unknown> },
): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const [field, mapping] of Object.entries(block.input)) {
    const value = fieldValue(mapping, request);
    if (value !== undefined) input[field] = value;
  }
  return input;
}

function fieldValue(
  mapping: FieldMapping,
  request: { prompt: string; images: string[]; options: Record<string, unknown> },
): unknown {
  if (!('from' in mapping)) return mapping.value;
  const values = [mapping.from].flat().map((source) => {
    if (source === 'prompt') return request.prompt;
    if (source === 'images') {
      if (request.images.length === 0) return undefined;
      return mapping.first ? request.images[0] : request.images;
    }
    return request.options[source];
  });
  if (values.some((value) => value === undefined)) return undefined;
  if (!mapping.map) return values.length === 1 ? values[0] : values.join(',');
  return ownValue(mapping.map, values.map(String).join(','));
}

/** The values a source can take, when they are a closed set; null when any value goes. */
function valuesOf(option: OptionShape | undefined): string[] | null {
  if (!option) return null;
  if (option.type === 'boolean') return ['true', 'false'];
  return option.values ? option.values.map(String) : null;
}

/** Every comma-joined combination of the sources' values; null when one source is open. */
function combinations(sets: Array<string[] | null>): Array<string | null> {
  if (sets.some((set) => set === null)) return [null];
  return (sets as string[][]).reduce<string[]>(
    (keys, set) => keys.flatMap((key) => set.map((value) => (key === '' ? value : `${key},${value}`))),
    [''],
  );
}

function describe(sources: string[], key: string): string {
  const values = key.split(',');
  return sources.map((source, i) => `${source}=${values[i]}`).join(' and ');
}
