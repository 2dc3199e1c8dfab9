import { randomUUID } from 'node:crypto';
import type { CallToolResult, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { BaseLogger } from 'pino';
import type { z } from 'zod';
import type { GenerationRow } from '../db/generation-reads.js';
import { ApiError, ValidationError } from '../errors.js';
import { admitGeneration } from '../generations/admit-generation.js';
import type { McpCaller, McpDeps } from './mcp-deps.js';
import { toolArguments } from './tool-arguments.js';
import { generationResult } from './tool-results.js';

/** Whether a generation has ended (every status but queued is final). */
export const isTerminal = (status: GenerationRow['status']) => status !== 'queued';

/** Sends one notification on the call's own stream (its progress). */
export type Notify = (notification: ServerNotification) => Promise<void>;

/** The progress of a call that waits: queued (1) → processing (2) → done (3), each told once. */
export class ProgressReporter {
  private reached = 0;

  constructor(
    private readonly token: string | number | undefined,
    private readonly notify: Notify,
  ) {}

  /** Tells `queued`: a create has been admitted (its row may already show a later step). */
  queued(): void {
    this.tell(1, 'queued');
  }

  /** Tells the step `row` has reached, if it is further than the last one told. */
  report(row: GenerationRow): void {
    if (this.token === undefined) return;
    const step = isTerminal(row.status) ? 3 : row.provider !== null ? 2 : 1;
    this.tell(step, step === 3 ? row.status : step === 2 ? `processing (${row.provider})` : 'queued');
  }

  private tell(step: number, message: string): void {
    if (this.token === undefined || step <= this.reached) return;
    this.reached = step;
    void this.notify({
      method: 'notifications/progress',
      params: { progressToken: this.token, progress: step, total: 3, message },
    }).catch(() => undefined);
  }
}

/** A tool's arguments as its schema takes them, or the API's 400 with an issue per field. */
export function parseArgs<T>(schema: z.ZodType<T>, args: unknown): T {
  const parsed = schema.safeParse(args ?? {});
  if (parsed.success) return parsed.data;
  throw new ValidationError(
    parsed.error.issues.map((issue) => ({
      field: issue.path.join('.'),
      code: issue.code === 'unrecognized_keys' ? 'unknown_field' : issue.code,
      message: issue.message,
    })),
    'The tool arguments are invalid.',
  );
}

/**
 * create_generation, as a plain call: admits the request through admission's one path (the API's
 * POST), then waits for the generation (bounded), telling progress. Without an idempotency_key
 * the server makes one and says to pass it back on a retry.
 */
export async function createGeneration(
  deps: McpDeps,
  caller: McpCaller,
  args: unknown,
  progress: ProgressReporter,
  log: Pick<BaseLogger, 'warn'>,
): Promise<CallToolResult> {
  const { row, key, generated } = await admitFromArgs(deps, caller, args, log);
  progress.queued();
  const parsed = parseArgs(toolArguments(deps.waitSeconds).create_generation, args);
  const wait = Math.min(parsed.wait_seconds ?? deps.waitSeconds, deps.waitSeconds);
  const now = await waitForEnd(deps, caller, row, wait, progress);
  const notes = [
    generated
      ? `Its idempotency_key is ${key}: if this call has to be retried, pass idempotency_key "${key}" so that it is not charged twice.`
      : `Its idempotency_key is ${key}.`,
  ];
  if (!isTerminal(now.status))
    notes.push(`It is still running: call get_generation with id "${now.id}" to wait for its result.`);
  return withMeta(await generationResult(toResultDeps(deps, caller), now, notes), { idempotency_key: key });
}

/**
 * Admits create_generation's request: the generation as it now stands. A refusal throws admission's
 * GenerationRefused (the API's 402, 409, 429…), which the call answers as a tool error.
 */
export async function admitFromArgs(
  deps: McpDeps,
  caller: McpCaller,
  args: unknown,
  log: Pick<BaseLogger, 'warn'>,
): Promise<{ row: GenerationRow; key: string; generated: boolean }> {
  const parsed = parseArgs(toolArguments(deps.waitSeconds).create_generation, args);
  const key = parsed.idempotency_key ?? `mcp-${randomUUID()}`;
  const admitted = await admitGeneration(
    deps.admission,
    {
      principal: { accountId: caller.accountId, keyId: caller.keyId, models: caller.models },
      idempotencyKey: key,
      body: parsed.request,
      recordInvalid: true,
    },
    log,
  );
  const row = (await deps.readGeneration(caller.accountId, admitted.generationId)) ?? admitted.known;
  return { row, key, generated: parsed.idempotency_key === undefined };
}

/** get_generation: the account's generation, once finished or after the wait. */
export async function getGeneration(
  deps: McpDeps,
  caller: McpCaller,
  args: unknown,
  progress: ProgressReporter,
): Promise<CallToolResult> {
  const parsed = parseArgs(toolArguments(deps.waitSeconds).get_generation, args);
  const row = await deps.readGeneration(caller.accountId, parsed.id);
  if (!row) throw new ApiError('not_found', 'No generation with this id in this account.');
  const wait = Math.min(parsed.wait_seconds ?? deps.waitSeconds, deps.waitSeconds);
  const now = await waitForEnd(deps, caller, row, wait, progress);
  const notes = isTerminal(now.status)
    ? []
    : [`It is still running: call get_generation with id "${now.id}" again to wait for its result.`];
  return generationResult(toResultDeps(deps, caller), now, notes);
}

/**
 * The generation once terminal, or as it stands after `seconds`, the client's departure or the
 * process's shutdown: the API's waiters of Prefer: wait, woken by the change notification (no
 * polling). Each change read meanwhile is told as progress.
 */
export async function waitForEnd(
  deps: McpDeps,
  caller: McpCaller,
  row: GenerationRow,
  seconds: number,
  progress: ProgressReporter,
): Promise<GenerationRow> {
  progress.report(row);
  if (isTerminal(row.status) || seconds <= 0) return row;
  const reread = () => deps.readGeneration(caller.accountId, row.id);
  const woken = deps.waitFor(row.id, caller.keyId, seconds * 1000, reread, caller.signal, (seen) =>
    progress.report(seen),
  );
  if (!woken) return row;
  const now = (await woken) ?? (await reread()) ?? row;
  progress.report(now);
  return now;
}

/** What a tool result of a generation is made with: this process's previews, for this call. */
export const toResultDeps = (deps: McpDeps, caller: McpCaller) => ({
  previews: deps.previews,
  signal: caller.signal,
  toGeneration: (row: GenerationRow) => deps.toGeneration(row),
});

function withMeta(result: CallToolResult, meta: Record<string, unknown>): CallToolResult {
  return { ...result, _meta: { ...result._meta, ...meta } };
}
