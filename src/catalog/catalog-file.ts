import { z } from 'zod';
import { joinValues, parseOptions } from '../validation/zod-messages.js';
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
  const shape = fileSchema.safeParse(json, parseOptions);
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
    const entry = entrySchema.safeParse(raw, parseOptions);
    const rawDefinition = (raw as { definition?: unknown } | null)?.definition;
    const definition = isPlainObject(rawDefinition)
      ? modelDefinitionSchema.safeParse(rawDefinition, parseOptions)
      : null;
    const definitionIssues = (definition?.error?.issues ?? []).map((issue) => ({
      ...issue,
      path: ['definition', ...issue.path],
    }));
    const issues = [...(entry.error?.issues ?? []), ...definitionIssues];
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

type Issue = z.core.$ZodIssue;
type Path = Array<string | number>;
const pathOf = (issue: Issue): Path => issue.path as Path;

/** The issues as `path: message` lines an operator can act on (zod's own texts are terse). */
function describeIssues(issues: readonly Issue[], input: unknown): string[] {
  return issues.flatMap((issue) => {
    const path = pathOf(issue);
    if (issue.code === 'invalid_union' && issue.errors.length > 0)
      return describeIssues(closestBranch(issue, input), input);
    if (issue.code === 'unrecognized_keys')
      return issue.keys.map((key) => `${formatPath([...path, key])}: unknown field`);
    const message = messageFor(issue, input);
    return [path.length === 0 ? message : `${formatPath(path)}: ${message}`];
  });
}

/**
 * A union that matched no branch: the issues of the branch the input came closest to. When every
 * branch failed on the value's type alone, one issue naming all the types that would do. (A
 * branch's issues are placed where the union is: zod 4 gives their paths from there.)
 */
function closestBranch(issue: z.core.$ZodIssueInvalidUnion, input: unknown): Issue[] {
  const branches = issue.errors.map((errors) =>
    errors.map((i): Issue => ({ ...i, path: [...issue.path, ...i.path] })),
  );
  const onType = (b: Issue[]) =>
    b.length === 1 && b[0]!.code === 'invalid_type' && b[0].path.length === issue.path.length;
  if (branches.every(onType)) {
    const expected = branches.map((b) => typeName((b[0] as z.core.$ZodIssueInvalidType).expected));
    const value = valueAt(input, pathOf(issue));
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
  const cost = (b: Issue[]) =>
    b.reduce((sum, i) => sum + (i.code === 'unrecognized_keys' ? i.keys.length * 10 : 1), 0);
  const depth = (b: Issue[]) => Math.max(...b.map((i) => i.path.length));
  return branches.reduce((best, b) =>
    cost(b) < cost(best) || (cost(b) === cost(best) && depth(b) > depth(best)) ? b : best,
  );
}

function messageFor(issue: Issue, input: unknown): string {
  const path = pathOf(issue);
  const value = valueAt(input, path);
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined) return 'missing';
      if (issue.expected === 'int') return `expected a whole number, got ${describeValue(value)}`;
      return `expected ${typeName(issue.expected)}, got ${describeValue(value)}`;
    case 'invalid_union':
      // No branch has the discriminator's value (the only union without branch errors).
      return `${describeValue(value)} is not allowed (one of ${((issue as { options?: unknown[] }).options ?? []).map(String).join(', ')})`;
    case 'invalid_value': {
      // An enum: text that is none of its values, or no text at all (the words zod 3 had for each).
      if (value === undefined) return 'missing';
      if (typeof value !== 'string')
        return `expected ${joinValues(issue.values)}, got ${describeValue(value)}`;
      const allowed = issue.values.join(', ');
      if (path.at(-1) === 'name' && path.at(-2) === 'provider')
        return `unknown provider ${JSON.stringify(value)} (one of ${providerNames.join(', ')})`;
      return `${JSON.stringify(value)} is not allowed (one of ${allowed})`;
    }
    case 'too_small':
      if (issue.origin === 'array') return `must have at least ${issue.minimum} item(s)`;
      if (issue.origin === 'string')
        return issue.minimum === 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`;
      return `must be ${issue.inclusive ? 'at least' : 'more than'} ${issue.minimum}, got ${describeValue(value)}`;
    case 'too_big':
      if (issue.origin === 'array') return `must have at most ${issue.maximum} item(s)`;
      if (issue.origin === 'string') return `must be at most ${issue.maximum} characters`;
      return `must be ${issue.inclusive ? 'at most' : 'less than'} ${issue.maximum}, got ${describeValue(value)}`;
    case 'invalid_format':
      if (issue.format === 'regex' && path.at(-1) === 'id' && path.length === 1)
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
