import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import { publicModelSchema } from '../catalog/public-model.js';
import { generationStatuses } from '../generation.js';
import { idempotencyKeyPattern } from '../generations/idempotency-key.js';
import { toJsonSchema } from '../json-schema.js';
import { PREVIEW_LONGEST_SIDE } from '../media/preview.js';
import type { McpDeps } from './mcp-deps.js';

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

/** A model as list_models shows it: GET /v1/models' entry without its request schema (describe_model gives that). */
const listedModelSchema = publicModelSchema.omit({ request_schema: true });
export const listedModelsJsonSchema = toJsonSchema(z.object({ models: z.array(listedModelSchema) }));
const describedModelJsonSchema = toJsonSchema(publicModelSchema);

const generationId = {
  type: 'string',
  pattern: '^gen_[A-Za-z0-9]{1,64}$',
  description: 'The generation id (gen_…), as create_generation or list_generations gave it.',
};

const idempotencyKey = {
  type: 'string',
  pattern: idempotencyKeyPattern.source,
  description:
    'Makes the call safe to retry: the same key with the same request returns the same generation and charges once. Leave it out on a first call (the server makes one and returns it); pass the returned one back when you retry.',
};

/**
 * The body of POST /v1/generations for any model of the catalog: each model's own request schema,
 * exactly as GET /v1/models and describe_model give it (never restated here).
 */
export function generationRequestSchema(catalog: CatalogCache): Record<string, unknown> {
  return {
    anyOf: catalog.list().map((model) => model.publicView.request_schema),
    description:
      'The generation request: `model`, `prompt` and that model’s options, exactly as describe_model’s `request_schema` for the model says. Input images are HTTPS URLs, or data:image/…;base64 URIs where the model accepts them.',
  };
}

const waitSeconds = (max: number) => ({
  type: 'integer',
  minimum: 0,
  maximum: max,
  description: `How long to wait for the generation to finish before answering, in seconds (0 to ${max}; default ${max}). Progress notifications are sent meanwhile.`,
});

/**
 * The tools, from the live catalog (a model added to the catalog is in the next tools/list).
 * Descriptions are written for a model choosing among them.
 */
export function toolDefinitions(deps: McpDeps): Tool[] {
  const request = generationRequestSchema(deps.admission.catalog);
  const wait = waitSeconds(deps.waitSeconds);
  const schemas = deps.outputSchemas;
  const preview = `Finished images come back as a preview (WebP, longest side at most ${PREVIEW_LONGEST_SIDE} px, at most 1 MB) and a resource_link to the full-size file; videos as a resource_link and a poster frame (their first frame, as such a preview).`;
  return [
    {
      name: 'list_models',
      title: 'List models',
      description:
        'Lists the image and video models you can generate with: id, name, what each makes (media_type), its options and what each option means, and its price in credits (default_price, and pricing by option). Call it first to choose a model; then describe_model for its exact request schema.',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: listedModelsJsonSchema as Tool['outputSchema'],
      annotations: { title: 'List models', readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    },
    {
      name: 'describe_model',
      title: 'Describe a model',
      description:
        'One model in full, with `request_schema`: the JSON Schema of the request create_generation and quote take for it (its fields, allowed values, defaults, limits).',
      inputSchema: {
        type: 'object',
        properties: { model: { type: 'string', description: 'The model id, as list_models gives it.' } },
        required: ['model'],
        additionalProperties: false,
      },
      outputSchema: describedModelJsonSchema as Tool['outputSchema'],
      annotations: {
        title: 'Describe a model',
        readOnlyHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: 'quote',
      title: 'Price a generation',
      description:
        'What create_generation with this request would cost now, in credits, and whether the balance covers it. Charges nothing and starts nothing; the request is checked exactly as create_generation checks it.',
      inputSchema: {
        type: 'object',
        properties: { request },
        required: ['request'],
        additionalProperties: false,
      },
      outputSchema: schemas.quote as Tool['outputSchema'],
      annotations: {
        title: 'Price a generation',
        readOnlyHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: 'create_generation',
      title: 'Generate an image or video',
      description: `Starts a generation and charges its price in credits (see quote). Waits up to ${deps.waitSeconds} s for it to finish, then returns it; if it is still running, call get_generation with its id. Clients that support MCP tasks may call it as a task: the task id is the generation id. Retrying? Pass the idempotency_key the first call returned, so that nothing is charged twice. ${preview}`,
      inputSchema: {
        type: 'object',
        properties: { request, idempotency_key: idempotencyKey, wait_seconds: wait },
        required: ['request'],
        additionalProperties: false,
      },
      outputSchema: schemas.generation as Tool['outputSchema'],
      annotations: {
        title: 'Generate an image or video',
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: true,
      },
      execution: { taskSupport: 'optional' },
    },
    {
      name: 'get_generation',
      title: 'Get a generation',
      description: `A generation by id: its status (queued, succeeded, failed, rejected), its result and what it cost. Waits up to wait_seconds for a queued one to finish. ${preview}`,
      inputSchema: {
        type: 'object',
        properties: { id: generationId, wait_seconds: wait },
        required: ['id'],
        additionalProperties: false,
      },
      outputSchema: schemas.generation as Tool['outputSchema'],
      annotations: {
        title: 'Get a generation',
        readOnlyHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: 'list_generations',
      title: 'List recent generations',
      description:
        'The account’s generations, newest first, a page at a time (pass next_cursor back as cursor for the next page); optionally only some statuses or one model.',
      inputSchema: {
        type: 'object',
        properties: {
          limit: {
            type: 'integer',
            minimum: 1,
            maximum: 100,
            description: 'Generations per page (default 20).',
          },
          status: {
            type: 'array',
            items: { type: 'string', enum: [...generationStatuses] },
            description: 'Only generations in these statuses.',
          },
          model: { type: 'string', description: 'Only generations of this model.' },
          cursor: { type: 'string', description: 'next_cursor of the previous page.' },
        },
        additionalProperties: false,
      },
      outputSchema: schemas.generationList as Tool['outputSchema'],
      annotations: {
        title: 'List recent generations',
        readOnlyHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: 'cancel_generation',
      title: 'Cancel a generation',
      description:
        'Stops a queued generation that the provider has not started, and refunds its credits in full. One the provider is running or has finished cannot be canceled (it is charged); the answer says so and nothing changes.',
      inputSchema: {
        type: 'object',
        properties: { id: generationId },
        required: ['id'],
        additionalProperties: false,
      },
      outputSchema: schemas.generation as Tool['outputSchema'],
      annotations: {
        title: 'Cancel a generation',
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    {
      name: 'get_credits',
      title: 'Show credits',
      description:
        'The account’s credit balance: the total that generations draw from, and its subscription and one-time parts.',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: schemas.credits as Tool['outputSchema'],
      annotations: { title: 'Show credits', readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    },
    {
      name: 'get_key_limits',
      title: 'Show what this connection may spend',
      description:
        'What the key (or connected app) you call with may do: its spend limit in credits, what is left of it (limit_remaining) and when it resets (resets_at), the models it may use (null: all), whether it is read-only, and what it has spent today, this week, this month and in all. Call it to plan within the budget: a generation that costs more than limit_remaining is refused (key_spend_limit_exceeded), nothing charged.',
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      outputSchema: schemas.key as Tool['outputSchema'],
      annotations: { title: 'Show limits', readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    },
  ];
}
