import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ApiError, ValidationError } from '../errors.js';
import { cancelGeneration } from '../generations/cancel-generation.js';
import { quoteGeneration } from '../generations/admit-generation.js';
import { quoteAnswer } from '../generations/key-rules.js';
import { findKeyState } from '../db/key-limits.js';
import { defaultPageSize, listGenerationsQuerySchema, pageOfGenerations } from '../generations/list-query.js';
import type { McpCaller, McpDeps } from './mcp-deps.js';
import { parseArgs, toResultDeps } from './generation-tools.js';
import { toolArguments } from './tool-arguments.js';
import { generationResult } from './tool-results.js';

/** The tools' arguments on this server (tool-arguments.ts). */
const argumentsOf = (deps: McpDeps) => toolArguments(deps.waitSeconds);

/** A result whose structured content is `value`, and the same as JSON text. */
function structured(value: Record<string, unknown>, words?: string): CallToolResult {
  return {
    content: [
      ...(words ? [{ type: 'text' as const, text: words }] : []),
      { type: 'text', text: JSON.stringify(value) },
    ],
    structuredContent: value,
  };
}

/** list_models: GET /v1/models' entries without their request schemas (describe_model has those). */
export function listModels(deps: McpDeps, args: unknown): CallToolResult {
  parseArgs(argumentsOf(deps).list_models, args);
  const models = deps.admission.catalog.list().map(({ publicView }) => {
    const { request_schema: _schema, ...listed } = publicView;
    return listed;
  });
  return structured(
    { models },
    `${models.length} models. Prices are in credits; describe_model gives a model's full request schema.`,
  );
}

/** describe_model: one model as GET /v1/models gives it, with its request's JSON Schema. */
export function describeModel(deps: McpDeps, args: unknown): CallToolResult {
  const { model } = parseArgs(argumentsOf(deps).describe_model, args);
  const found = deps.admission.catalog.list().find((m) => m.publicView.id === model);
  if (!found)
    throw new ApiError('not_found', `No model ${JSON.stringify(model)}; list_models names every model.`);
  return structured(found.publicView);
}

/** quote: POST /v1/generations/quote. */
export async function quote(deps: McpDeps, caller: McpCaller, args: unknown): Promise<CallToolResult> {
  const { request } = parseArgs(argumentsOf(deps).quote, args);
  const priced = await quoteGeneration(deps.admission, request, caller);
  const answer = await quoteAnswer(deps.db, caller.keyId, priced, await deps.balance(caller.accountId));
  const { key_limit: limit, limited_by: limitedBy } = answer;
  return structured(
    { ...answer },
    `${answer.model} costs ${answer.credits} credits; the balance is ${answer.balance.total}${limitedBy === 'balance' ? ', which does not cover it' : ''}` +
      (limit
        ? `; this connection's limit has ${limit.limit_remaining} of ${limit.spend_limit} credits left${limitedBy === 'key_spend_limit' ? ', which does not cover it' : ''}${limit.resets_at ? ` (it resets at ${limit.resets_at})` : ''}`
        : '') +
      '.',
  );
}

/** get_key_limits: GET /v1/key. */
export async function getKeyLimits(deps: McpDeps, caller: McpCaller, args: unknown): Promise<CallToolResult> {
  parseArgs(argumentsOf(deps).get_key_limits, args);
  const state = await findKeyState(deps.db, caller.keyId, caller.accountId);
  if (!state) throw new ApiError('unauthorized', 'Unknown API key.');
  const key = deps.toApiKey(state);
  const limit =
    key.spend_limit === null
      ? 'No spend limit of its own: the account balance is the bound.'
      : `${key.limit_remaining} of ${key.spend_limit} credits left${key.resets_at ? ` until ${key.resets_at}` : ' (a lifetime limit)'}.`;
  const models = key.models === null ? 'Every model.' : `Models: ${key.models.join(', ') || 'none'}.`;
  return structured(key, `${limit} ${models}${key.access === 'read_only' ? ' Read-only.' : ''}`);
}

/** get_credits: GET /v1/credits. */
export async function getCredits(deps: McpDeps, caller: McpCaller, args: unknown): Promise<CallToolResult> {
  parseArgs(argumentsOf(deps).get_credits, args);
  const balance = await deps.balance(caller.accountId);
  return structured({ ...balance }, `The balance is ${balance.credits} credits.`);
}

/** list_generations: GET /v1/generations, its query checked by the API's own schema. */
export async function listGenerations(
  deps: McpDeps,
  caller: McpCaller,
  args: unknown,
): Promise<CallToolResult> {
  const parsed = parseArgs(argumentsOf(deps).list_generations, args);
  const query = listGenerationsQuerySchema.safeParse({
    ...(parsed.limit !== undefined && { limit: String(parsed.limit) }),
    ...(parsed.status && { status: parsed.status.join(',') }),
    ...(parsed.model !== undefined && { model: parsed.model }),
    ...(parsed.cursor !== undefined && { cursor: parsed.cursor }),
  });
  if (!query.success)
    throw new ValidationError(
      query.error.issues.map((i) => ({ field: i.path.join('.'), code: 'invalid_value', message: i.message })),
    );
  const { rows, nextCursor } = await pageOfGenerations(deps.db, {
    accountId: caller.accountId,
    limit: query.data.limit ?? defaultPageSize,
    statuses: query.data.status ?? null,
    model: query.data.model ?? null,
    after: query.data.cursor ?? null,
  });
  const data = rows.map((row) => deps.toGeneration(row));
  return structured(
    { data, next_cursor: nextCursor },
    `${data.length} generations${nextCursor ? '; pass next_cursor as cursor for more' : ''}.`,
  );
}

/** cancel_generation: POST /v1/generations/{id}/cancel, its refund rules the workflow's. */
export async function cancel(deps: McpDeps, caller: McpCaller, args: unknown): Promise<CallToolResult> {
  const { id } = parseArgs(argumentsOf(deps).cancel_generation, args);
  const result = await cancelGeneration(
    { db: deps.db, temporal: deps.admission.temporal, timeoutMs: deps.admission.admissionTimeoutMs },
    id,
    caller.accountId,
  );
  deps.forget(id);
  if (!result) throw new ApiError('not_found', 'No generation with this id in this account.');
  if (result.canceled) return generationResult(toResultDeps(deps, caller), result.generation);
  throw notCancelable(result.generation.status, deps.toGeneration(result.generation));
}

/** The API's 409 not_cancelable, in its words, with the generation as it stands. */
export function notCancelable(status: string, generation?: unknown): ApiError {
  return new ApiError(
    'not_cancelable',
    status === 'queued'
      ? 'The provider is running or has run this generation; it can no longer be canceled without charge. Nothing changed.'
      : `This generation is ${status} already; nothing changed.`,
    generation === undefined ? {} : { generation },
  );
}
