import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type CreateTaskResult,
  type ListTasksResult,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import type { BaseLogger } from 'pino';
import type { GenerationRow } from '../db/generation-reads.js';
import { cancelGeneration, isCanceled } from '../generations/cancel-generation.js';
import { listGenerationsQuerySchema, pageOfGenerations } from '../generations/list-query.js';
import { notCancelable } from './account-tools.js';
import { admitFromArgs, isTerminal, toResultDeps } from './generation-tools.js';
import type { McpCaller, McpDeps } from './mcp-deps.js';
import { generationResult } from './tool-results.js';

/** How often a client is asked to poll tasks/get (it may also block on tasks/result). */
const pollIntervalMs = 2000;

/**
 * MCP tasks that are the generations themselves (protocol 2025-11-25): a task's id is its
 * generation's id, its state the generation's row in PostgreSQL. There is no task store: any API
 * process answers any task, before and after a restart, and tasks/list is the account's generations.
 */
export function taskOf(row: GenerationRow): Task {
  return {
    taskId: row.id,
    status: taskStatus(row),
    ...(statusMessage(row) !== undefined && { statusMessage: statusMessage(row) }),
    createdAt: row.created_at,
    lastUpdatedAt: row.completed_at ?? row.created_at,
    // Kept as long as the generation: its content until expires_at, the record for good.
    ttl: null,
    pollInterval: pollIntervalMs,
  };
}

/** queued → working; succeeded → completed; canceled → cancelled; failed or rejected → failed. */
function taskStatus(row: GenerationRow): Task['status'] {
  switch (row.status) {
    case 'queued':
      return 'working';
    case 'succeeded':
      return 'completed';
    case 'failed':
      return isCanceled(row) ? 'cancelled' : 'failed';
    case 'rejected':
      return 'failed';
  }
}

function statusMessage(row: GenerationRow): string | undefined {
  if (row.status === 'queued') return row.provider === null ? 'queued' : `processing (${row.provider})`;
  return row.error ? `${row.error.code}: ${row.error.message}` : undefined;
}

/** create_generation called as a task: admitted, and answered at once with its task. */
export async function createGenerationTask(
  deps: McpDeps,
  caller: McpCaller,
  args: unknown,
  log: Pick<BaseLogger, 'warn'>,
): Promise<CreateTaskResult> {
  const admitted = await admitFromArgs(deps, caller, args, log);
  return { task: taskOf(admitted.row), _meta: { idempotency_key: admitted.key } };
}

async function ownGeneration(deps: McpDeps, caller: McpCaller, taskId: string): Promise<GenerationRow> {
  const row = /^gen_[A-Za-z0-9]{1,64}$/.test(taskId)
    ? await deps.readGeneration(caller.accountId, taskId)
    : null;
  if (!row) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
  return row;
}

/** tasks/get: the generation's state as a task. */
export async function getTask(deps: McpDeps, caller: McpCaller, taskId: string): Promise<Task> {
  return taskOf(await ownGeneration(deps, caller, taskId));
}

/**
 * tasks/result: blocks until the generation is terminal (woken by its change notification, as
 * Prefer: wait is), then answers what create_generation would have: the tool result. A wait cut
 * short by the client's departure or the process's shutdown is an error the client asks again after.
 */
export async function taskResult(deps: McpDeps, caller: McpCaller, taskId: string): Promise<CallToolResult> {
  let row = await ownGeneration(deps, caller, taskId);
  while (!isTerminal(row.status)) {
    const startedAt = Date.now();
    const reread = () => deps.readGeneration(caller.accountId, taskId);
    const timeoutMs = Math.max(1, deps.waitSeconds) * 1000;
    const woken = deps.waitFor(taskId, caller.keyId, timeoutMs, reread, caller.signal);
    const now = woken ? ((await woken) ?? (await reread())) : null;
    if (now) row = now;
    const cutShort = !woken || caller.signal.aborted || Date.now() - startedAt < timeoutMs - 100;
    if (!isTerminal(row.status) && cutShort)
      throw new McpError(
        ErrorCode.InternalError,
        `Task ${taskId} is still working and this server could not wait for it now; ask tasks/result again.`,
      );
  }
  return {
    ...(await generationResult(toResultDeps(deps, caller), row)),
    _meta: { 'io.modelcontextprotocol/related-task': { taskId } },
  };
}

/** tasks/cancel: the API's cancel, with its refund rules; a task that can no longer stop unbilled is refused. */
export async function cancelTask(deps: McpDeps, caller: McpCaller, taskId: string): Promise<Task> {
  const row = await ownGeneration(deps, caller, taskId);
  if (isTerminal(row.status))
    throw new McpError(
      ErrorCode.InvalidParams,
      `Cannot cancel task in terminal status: ${taskOf(row).status}`,
    );
  const result = await cancelGeneration(
    { db: deps.db, temporal: deps.admission.temporal, timeoutMs: deps.admission.admissionTimeoutMs },
    taskId,
    caller.accountId,
  );
  deps.forget(taskId);
  if (!result) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
  if (!result.canceled)
    throw new McpError(ErrorCode.InvalidParams, notCancelable(result.generation.status).message);
  return taskOf(result.generation);
}

/** tasks/list: the account's generations, newest first, with the API's cursor. */
export async function listTasks(
  deps: McpDeps,
  caller: McpCaller,
  cursor: string | undefined,
): Promise<ListTasksResult> {
  const query = listGenerationsQuerySchema.safeParse(cursor === undefined ? {} : { cursor });
  if (!query.success) throw new McpError(ErrorCode.InvalidParams, 'Not a cursor this server gave out.');
  const { rows, nextCursor } = await pageOfGenerations(deps.db, {
    accountId: caller.accountId,
    limit: 50,
    statuses: null,
    model: null,
    after: query.data.cursor ?? null,
  });
  return { tasks: rows.map(taskOf), ...(nextCursor && { nextCursor }) };
}
