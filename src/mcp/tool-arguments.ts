import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import { generationStatuses } from '../generation.js';
import { idempotencyKeySchema } from '../generations/idempotency-key.js';
import { generationIdPattern, maxPageSize } from '../generations/list-query.js';
import { toJsonSchema } from '../json-schema.js';

/*
 * Each tool's arguments, written once as zod: tools/call parses them with it (parseArgs), and
 * tools/list publishes its JSON Schema (toolInputSchema), as the OpenAPI document is derived from
 * the routes' schemas. Two things are published that the parse is lenient on, said with `meta`
 * beside the check: a generation id's form (any other text is no generation of the account's, a
 * not_found, as the API's path answers), and the longest wait (a longer one is the server's
 * longest, as Prefer: wait is clamped).
 */

/** Every tool's name: what `tools/call` dispatches on. */
export const toolNames = [
  'list_models',
  'describe_model',
  'quote',
  'create_generation',
  'get_generation',
  'list_generations',
  'cancel_generation',
  'get_credits',
  'get_key_limits',
] as const;
export type ToolName = (typeof toolNames)[number];

const noArguments = z.object({}).strict();

const generationId = z.string().min(1).meta({
  pattern: generationIdPattern.source,
  description: 'The generation id (gen_…), as create_generation or list_generations gave it.',
});

/**
 * The request of POST /v1/generations: admission checks it (each model's request schema, as the
 * API's POST does), not the arguments' parse; tools/list publishes each model's schema in its place.
 */
const request = z
  .unknown()
  .describe(
    'The generation request: `model`, `prompt` and that model’s options, exactly as describe_model’s `request_schema` for the model says. Input images are HTTPS URLs, or data:image/…;base64 URIs where the model accepts them.',
  );

const idempotencyKey = idempotencyKeySchema
  .optional()
  .describe(
    'Makes the call safe to retry: the same key with the same request returns the same generation and charges once. Leave it out on a first call (the server makes one and returns it); pass the returned one back when you retry.',
  );

const waitSeconds = (max: number) =>
  z
    .number()
    .int()
    .min(0)
    .meta({
      maximum: max,
      description: `How long to wait for the generation to finish before answering, in seconds (0 to ${max}; default ${max}). Progress notifications are sent meanwhile.`,
    })
    .optional();

function argumentsWaitingUpTo(maxWaitSeconds: number) {
  const wait = waitSeconds(maxWaitSeconds);
  return {
    list_models: noArguments,
    describe_model: z
      .object({ model: z.string().describe('The model id, as list_models gives it.') })
      .strict(),
    quote: z.object({ request }).strict(),
    create_generation: z.object({ request, idempotency_key: idempotencyKey, wait_seconds: wait }).strict(),
    get_generation: z.object({ id: generationId, wait_seconds: wait }).strict(),
    list_generations: z
      .object({
        limit: z
          .number()
          .int()
          .min(1)
          .max(maxPageSize)
          .optional()
          .describe('Generations per page (default 20).'),
        status: z
          .array(z.enum(generationStatuses))
          .min(1)
          .optional()
          .describe('Only generations in these statuses.'),
        model: z.string().optional().describe('Only generations of this model.'),
        cursor: z.string().optional().describe('next_cursor of the previous page.'),
      })
      .strict(),
    cancel_generation: z.object({ id: generationId }).strict(),
    get_credits: noArguments,
    get_key_limits: noArguments,
  } satisfies Record<ToolName, z.ZodObject>;
}

export type ToolArguments = ReturnType<typeof argumentsWaitingUpTo>;

const byLongestWait = new Map<number, ToolArguments>();

/** Every tool's arguments on a server that waits at most `maxWaitSeconds` (MCP_WAIT_SECONDS): made once per value. */
export function toolArguments(maxWaitSeconds: number): ToolArguments {
  let made = byLongestWait.get(maxWaitSeconds);
  if (!made) byLongestWait.set(maxWaitSeconds, (made = argumentsWaitingUpTo(maxWaitSeconds)));
  return made;
}

/**
 * A tool's input schema as tools/list publishes it: its arguments' JSON Schema, with a `request`
 * being any model of the live catalog, each model's own request schema exactly as GET /v1/models
 * and describe_model give it (never restated here).
 */
export function toolInputSchema(args: z.ZodObject, catalog: CatalogCache): Tool['inputSchema'] {
  const json = toJsonSchema(args, 'input') as Tool['inputSchema'] & {
    properties: Record<string, Record<string, unknown>>;
  };
  const { request: published } = json.properties;
  if (published)
    json.properties.request = {
      anyOf: catalog.list().map((model) => model.publicView.request_schema),
      ...published,
    };
  return json;
}
