import { z } from 'zod';

/**
 * A zod schema as JSON Schema (2019-09, which OpenAPI 3.1 reads), with zod 4's own converter.
 *
 * What is published was first made by zod-to-json-schema, and clients may have generated code from
 * it; so where zod 4 says the same thing in other words, the override keeps the old words:
 * - a datetime is `format: date-time` alone (zod 4 adds the regular expression it checks with);
 * - the description of a nullable field's schema is on the field too, as it was;
 * - an integer states no bounds it was not given (zod 4 adds the safe-integer range);
 * - a union of literals of one type is `{ type, enum: [...] }`, not one `anyOf` branch per value;
 * - an `io: 'input'` object keeps `additionalProperties: false` unless it is a passthrough, as
 *   zod-to-json-schema's default ("strip" objects published as closed) had it.
 *
 * `io`: 'output' publishes what a pipe or coercion gives out (a query parameter read as a number);
 * 'input' publishes what a transform takes in (a cursor's text, not what it decodes to).
 */
export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output' = 'output'): Record<string, unknown> {
  const json = z.toJSONSchema(schema, {
    target: 'draft-2019-09',
    io,
    reused: 'inline',
    unrepresentable: 'any',
    override: ({ zodSchema, jsonSchema }) => {
      const def = (
        zodSchema as unknown as {
          _zod: { def: { type: string; catchall?: { _zod: { def: { type: string } } } } };
        }
      )._zod.def;
      if (jsonSchema.format === 'date-time') delete jsonSchema.pattern;
      if (
        def.type === 'object' &&
        jsonSchema.additionalProperties === undefined &&
        def.catchall === undefined
      )
        jsonSchema.additionalProperties = false;
      // z.int() states the safe-integer range; the published document never did.
      if (jsonSchema.type === 'integer') {
        if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
        if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
      }
      const firstBranch = jsonSchema.anyOf?.[0];
      if (def.type === 'nullable' && jsonSchema.description === undefined && firstBranch?.description)
        jsonSchema.description = firstBranch.description;
      collapseLiteralUnion(jsonSchema);
      inPublishedOrder(jsonSchema);
    },
  });
  delete json.$schema;
  return json;
}

/**
 * The keywords of one schema in the order zod-to-json-schema wrote them: `type` and `items` first,
 * `description` last. The document is served as it is built, so order is part of its bytes.
 */
function inPublishedOrder(node: Record<string, unknown>): void {
  const first = ['type', 'items'].filter((key) => key in node);
  const last = 'description' in node ? ['description'] : [];
  const middle = Object.keys(node).filter((key) => !first.includes(key) && !last.includes(key));
  const entries = [...first, ...middle, ...last].map((key) => [key, node[key]] as const);
  for (const key of Object.keys(node)) delete node[key];
  for (const [key, value] of entries) node[key] = value;
}

/** `anyOf: [{ type: number, const: 4 }, { type: number, const: 6 }]` as `{ type: number, enum: [4, 6] }`. */
function collapseLiteralUnion(node: Record<string, unknown>): void {
  const branches = node.anyOf as Array<Record<string, unknown>> | undefined;
  if (!Array.isArray(branches) || branches.length === 0) return;
  const type = branches[0]!.type;
  const literal = (b: Record<string, unknown>) =>
    Object.keys(b).length === 2 && 'const' in b && b.type === type && typeof type === 'string';
  if (!branches.every(literal)) return;
  delete node.anyOf;
  node.type = type;
  node.enum = branches.map((b) => b.const);
}
