import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { publicModelSchema } from '../catalog/public-model.js';
import { toJsonSchema } from '../json-schema.js';
import { PREVIEW_LONGEST_SIDE } from '../media/preview.js';
import type { McpDeps } from './mcp-deps.js';
import { toolArguments, toolInputSchema, type ToolName } from './tool-arguments.js';

/** A model as list_models shows it: GET /v1/models' entry without its request schema (describe_model gives that). */
const listedModelSchema = publicModelSchema.omit({ request_schema: true });
export const listedModelsJsonSchema = toJsonSchema(z.object({ models: z.array(listedModelSchema) }));
const describedModelJsonSchema = toJsonSchema(publicModelSchema);

/** A tool as this file words it: its input schema comes from its arguments (tool-arguments.ts). */
type ToolWords = Omit<Tool, 'inputSchema'> & { name: ToolName };

/** The annotations of a tool that only reads. */
const readOnly = (title: string) => ({
  title,
  readOnlyHint: true,
  idempotentHint: true,
  openWorldHint: false,
});

/**
 * The tools, from the live catalog (a model added to the catalog is in the next tools/list).
 * Descriptions are written for a model choosing among them.
 */
export function toolDefinitions(deps: McpDeps): Tool[] {
  const args = toolArguments(deps.waitSeconds);
  return [...choosingTools(deps), ...generationTools(deps), ...accountTools(deps)].map(
    ({ name, title, description, outputSchema, ...rest }) => ({
      name,
      title,
      description,
      inputSchema: toolInputSchema(args[name], deps.admission.catalog),
      outputSchema,
      ...rest,
    }),
  );
}

/** What there is to generate with, and what a request would cost: list_models, describe_model, quote. */
function choosingTools(deps: McpDeps): ToolWords[] {
  return [
    {
      name: 'list_models',
      title: 'List models',
      description:
        'Lists the image and video models you can generate with: id, name, what each makes (media_type), its options and what each option means, and its price in credits (default_price, and pricing by option). Call it first to choose a model; then describe_model for its exact request schema.',
      outputSchema: listedModelsJsonSchema as Tool['outputSchema'],
      annotations: readOnly('List models'),
    },
    {
      name: 'describe_model',
      title: 'Describe a model',
      description:
        'One model in full, with `request_schema`: the JSON Schema of the request create_generation and quote take for it (its fields, allowed values, defaults, limits).',
      outputSchema: describedModelJsonSchema as Tool['outputSchema'],
      annotations: readOnly('Describe a model'),
    },
    {
      name: 'quote',
      title: 'Price a generation',
      description:
        'What create_generation with this request would cost now, in credits, and whether the balance covers it. Charges nothing and starts nothing; the request is checked exactly as create_generation checks it.',
      outputSchema: deps.outputSchemas.quote as Tool['outputSchema'],
      annotations: readOnly('Price a generation'),
    },
  ];
}

/** The account's generations: create_generation, get_generation, list_generations, cancel_generation. */
function generationTools(deps: McpDeps): ToolWords[] {
  const generation = deps.outputSchemas.generation as Tool['outputSchema'];
  const preview = `Finished images come back as a preview (WebP, longest side at most ${PREVIEW_LONGEST_SIDE} px, at most 1 MB) and a resource_link to the full-size file; videos as a resource_link and a poster frame (their first frame, as such a preview).`;
  return [
    {
      name: 'create_generation',
      title: 'Generate an image or video',
      description: `Starts a generation and charges its price in credits (see quote). Waits up to ${deps.waitSeconds} s for it to finish, then returns it; if it is still running, call get_generation with its id. Clients that support MCP tasks may call it as a task: the task id is the generation id. Retrying? Pass the idempotency_key the first call returned, so that nothing is charged twice. ${preview}`,
      outputSchema: generation,
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
      outputSchema: generation,
      annotations: readOnly('Get a generation'),
    },
    {
      name: 'list_generations',
      title: 'List recent generations',
      description:
        'The account’s generations, newest first, a page at a time (pass next_cursor back as cursor for the next page); optionally only some statuses or one model.',
      outputSchema: deps.outputSchemas.generationList as Tool['outputSchema'],
      annotations: readOnly('List recent generations'),
    },
    {
      name: 'cancel_generation',
      title: 'Cancel a generation',
      description:
        'Stops a queued generation that the provider has not started, and refunds its credits in full. One the provider is running or has finished cannot be canceled (it is charged); the answer says so and nothing changes.',
      outputSchema: generation,
      annotations: {
        title: 'Cancel a generation',
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
  ];
}

/** What the account has and the connection may spend: get_credits, get_key_limits. */
function accountTools(deps: McpDeps): ToolWords[] {
  return [
    {
      name: 'get_credits',
      title: 'Show credits',
      description:
        'The account’s credit balance: the total that generations draw from, and its subscription and one-time parts.',
      outputSchema: deps.outputSchemas.credits as Tool['outputSchema'],
      annotations: readOnly('Show credits'),
    },
    {
      name: 'get_key_limits',
      title: 'Show what this connection may spend',
      description:
        'What the key (or connected app) you call with may do: its spend limit in credits, what is left of it (limit_remaining) and when it resets (resets_at), the models it may use (null: all), whether it is read-only, and what it has spent today, this week, this month and in all. Call it to plan within the budget: a generation that costs more than limit_remaining is refused (key_spend_limit_exceeded), nothing charged.',
      outputSchema: deps.outputSchemas.key as Tool['outputSchema'],
      annotations: readOnly('Show limits'),
    },
  ];
}
