import { z, type ZodIssue } from 'zod';
import { modelDefinitionSchema, type ModelDefinition } from './catalog-entry.js';
import { providerNames } from './provider-mapping.js';

/**
 * A catalog file: the models an operator imports with `npm run admin -- import-catalog FILE`.
 *
 *   { "models": [ { "id": "fal-flux-dev", "sort_order": 110, "active": true, "definition": { … } } ] }
 *
 * Every entry is checked before anything is applied, and every problem is reported with the entry
 * and the field it is in, so that one run tells the operator all there is to fix.
 */

/** A model id, as the `models` table's CHECK constraint has it (0001_foundation.sql). */
const modelIdPattern = /^[a-z0-9][a-z0-9.-]*$/;

/** PostgreSQL `integer`, the type of `models.sort_order`. */
const int32 = { min: -2_147_483_648, max: 2_147_483_647 };

const fileSchema = z.object({ models: z.array(z.unknown()) }).strict();

const entrySchema = z
  .object({
    id: z.string().regex(modelIdPattern),
    /** Position in GET /v1/models (ascending, then by id). */
    sort_order: z.number().int().min(int32.min).max(int32.max),
    /** An inactive model stays in the table but is neither listed nor accepted. */
    active: z.boolean().default(true),
    /** Checked on its own (modelDefinitionSchema), so its problems show whatever else is wrong. */
    definition: z.object({}).passthrough(),
  })
  .strict();

/** One model of a checked catalog file, ready to store. */
export interface CatalogFileModel {
  /** Where it is in the file (`models[2] "fal-flux-dev"`), for messages. */
  label: string;
  id: string;
  sort_order: number;
  active: boolean;
  /** The definition as parsed: defaults filled in, as the API reads it back. */
  definition: ModelDefinition;
}

/** The file cannot be imported; `problems` lists every reason, one line each. */
export class CatalogFileRefused extends Error {
  override readonly name = 'CatalogFileRefused';
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(
      `${file}: nothing was imported; ${problems.length === 1 ? 'one problem' : `${problems.length} problems`}:\n${problems.map((p) => `  ${p}`).join('\n')}`,
    );
  }
}

/** Parses and checks a catalog file's text (`file` names it in messages); throws CatalogFileRefused. */
export function parseCatalogFile(text: string, file: string): CatalogFileModel[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new CatalogFileRefused(file, [`not JSON: ${(error as Error).message}`]);
  }
  const shape = fileSchema.safeParse(json);
  if (!shape.success) {
    throw new CatalogFileRefused(file, [
      `not a catalog file: expected { "models": [ … ] }; ${describeIssues(shape.error.issues, json).join('; ')}`,
    ]);
  }
  const problems: string[] = [];
  const models: CatalogFileModel[] = [];
  const firstIndexOf = new Map<string, number>();
  for (const [index, raw] of shape.data.models.entries()) {
    const id = (raw as { id?: unknown } | null)?.id;
    const label = `models[${index}]${typeof id === 'string' ? ` ${JSON.stringify(id)}` : ''}`;
    if (typeof id === 'string') {
      const first = firstIndexOf.get(id);
      if (first === undefined) firstIndexOf.set(id, index);
      else problems.push(`${label}: id: the same id as models[${first}]; each model appears once`);
    }
    const entry = entrySchema.safeParse(raw);
    const rawDefinition = (raw as { definition?: unknown } | null)?.definition;
    const definition = isPlainObject(rawDefinition)
      ? modelDefinitionSchema.safeParse(rawDefinition, { path: ['definition'] })
      : null;
    const issues = [...(entry.error?.issues ?? []), ...(definition?.error?.issues ?? [])];
    problems.push(...describeIssues(issues, raw).map((p) => `${label}: ${p}`));
    if (definition?.success) {
      // The definition schema drops fields it does not know; in a file they are typing mistakes.
      const unknown = droppedFields(rawDefinition, definition.data, ['definition']);
      problems.push(...unknown.map((path) => `${label}: ${formatPath(path)}: unknown field`));
    }
    if (entry.success && definition?.success)
      models.push({ label, ...entry.data, definition: definition.data });
  }
  if (problems.length > 0) throw new CatalogFileRefused(file, problems);
  return models;
}

/** The issues as `path: message` lines an operator can act on (zod's own texts are terse). */
function describeIssues(issues: readonly ZodIssue[], input: unknown): string[] {
  return issues.flatMap((issue) => {
    if (issue.code === 'invalid_union') return describeIssues(closestBranch(issue, input), input);
    if (issue.code === 'unrecognized_keys')
      return issue.keys.map((key) => `${formatPath([...issue.path, key])}: unknown field`);
    const message = messageFor(issue, input);
    return [issue.path.length === 0 ? message : `${formatPath(issue.path)}: ${message}`];
  });
}

/**
 * A union that matched no branch: the issues of the branch the input came closest to. When every
 * branch failed on the value's type alone, one issue naming all the types that would do.
 */
function closestBranch(issue: z.ZodInvalidUnionIssue, input: unknown): ZodIssue[] {
  const branches = issue.unionErrors.map((error) => error.issues);
  const onType = (b: ZodIssue[]) =>
    b.length === 1 && b[0]!.code === 'invalid_type' && b[0]!.path.length === issue.path.length;
  if (branches.every(onType)) {
    const expected = branches.map((b) => typeName((b[0] as z.ZodInvalidTypeIssue).expected));
    const value = valueAt(input, issue.path);
    return [
      {
        code: 'custom',
        path: issue.path,
        message: `expected ${expected.join(' or ')}, got ${describeValue(value)}`,
      },
    ];
  }
  // Fewest unknown fields first (they say the input was meant as another branch), then the
  // fewest issues, then the deepest: the branch that got furthest.
  const cost = (b: ZodIssue[]) =>
    b.reduce((sum, i) => sum + (i.code === 'unrecognized_keys' ? i.keys.length * 10 : 1), 0);
  const depth = (b: ZodIssue[]) => Math.max(...b.map((i) => i.path.length));
  return branches.reduce((best, b) =>
    cost(b) < cost(best) || (cost(b) === cost(best) && depth(b) > depth(best)) ? b : best,
  );
}

function messageFor(issue: ZodIssue, input: unknown): string {
  const value = valueAt(input, issue.path);
  switch (issue.code) {
    case 'invalid_type':
      if (issue.received === 'undefined') return 'missing';
      if (issue.expected === 'integer') return `expected a whole number, got ${describeValue(value)}`;
      return `expected ${typeName(issue.expected)}, got ${describeValue(value)}`;
    case 'invalid_enum_value': {
      const allowed = issue.options.join(', ');
      if (issue.path.at(-1) === 'name' && issue.path.at(-2) === 'provider')
        return `unknown provider ${JSON.stringify(issue.received)} (one of ${providerNames.join(', ')})`;
      return `${JSON.stringify(issue.received)} is not allowed (one of ${allowed})`;
    }
    case 'invalid_union_discriminator':
      return `${describeValue(value)} is not allowed (one of ${issue.options.map(String).join(', ')})`;
    case 'invalid_literal':
      return `must be ${JSON.stringify(issue.expected)}`;
    case 'too_small':
      if (issue.type === 'array') return `must have at least ${issue.minimum} item(s)`;
      if (issue.type === 'string')
        return issue.minimum === 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`;
      return `must be ${issue.inclusive ? 'at least' : 'more than'} ${issue.minimum}, got ${describeValue(value)}`;
    case 'too_big':
      if (issue.type === 'array') return `must have at most ${issue.maximum} item(s)`;
      if (issue.type === 'string') return `must be at most ${issue.maximum} characters`;
      return `must be ${issue.inclusive ? 'at most' : 'less than'} ${issue.maximum}, got ${describeValue(value)}`;
    case 'invalid_string':
      if (issue.validation === 'regex' && issue.path.at(-1) === 'id' && issue.path.length === 1)
        return `${describeValue(value)} is not a model id (lower-case letters, digits, dots and hyphens, starting with a letter or digit)`;
      return `${describeValue(value)} is not valid: ${issue.message}`;
    default:
      return issue.message;
  }
}

/** Fields present in `input` that parsing left out of `output` (objects the schema strips). */
function droppedFields(
  input: unknown,
  output: unknown,
  path: Array<string | number>,
): Array<string | number>[] {
  if (Array.isArray(input) && Array.isArray(output))
    return input.flatMap((item, i) => droppedFields(item, output[i], [...path, i]));
  if (!isPlainObject(input) || !isPlainObject(output)) return [];
  return Object.entries(input).flatMap(([key, value]) =>
    Object.hasOwn(output, key) ? droppedFields(value, output[key], [...path, key]) : [[...path, key]],
  );
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function valueAt(input: unknown, path: ReadonlyArray<string | number>): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}

const articles: Record<string, string> = {
  object: 'an object',
  array: 'a list',
  string: 'a string',
  number: 'a number',
  integer: 'a whole number',
  boolean: 'true or false',
  null: 'null',
};
const typeName = (type: string): string => articles[type] ?? type;

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (value !== null && typeof value === 'object') return 'an object';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

/** `definition.pricing.credits.4K`; keys other than plain words are quoted: `map["16:9,1K"]`, `values[0]`. */
function formatPath(path: ReadonlyArray<string | number>): string {
  return path
    .map((key, i) => {
      if (typeof key === 'number') return `[${key}]`;
      if (/^[A-Za-z0-9_-]+$/.test(key)) return i === 0 ? key : `.${key}`;
      return `[${JSON.stringify(key)}]`;
    })
    .join('');
}
