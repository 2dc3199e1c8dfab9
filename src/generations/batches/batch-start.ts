import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { deleteBatch, type BatchRow } from '../../db/batches.js';
import type { DatabasePool } from '../../db/pool.js';
import { ApiError } from '../../vocabulary/errors.js';
import type { BatchStart } from '../../workflows/batch-workflow.js';
import { batchQueue } from '../../workflows/generation-types.js';
import { batchLinePriority } from '../admission/admit-update.js';
import type { WebhookSettings } from '../admission/webhook-request.js';

/** What starting a batch's workflow needs: Temporal, and the settings its run is started with. */
export interface BatchStartDeps {
  temporal: Client;
  taskQueue: string;
  /** The retry schedule a batch's own webhook subscription keeps (WEBHOOK_RETRY_DELAYS_MS). */
  webhooks?: Pick<WebhookSettings, 'retryDelaysMs'>;
}

/**
 * Starts the batch's workflow; a 503 if it cannot be (a batch without a key is then taken back).
 * A start that failed may have been done, its answer lost: Temporal is asked first, and a workflow
 * that exists runs the batch (no 503, whose resend would make a second batch).
 */
export async function startBatchOrRefuse(
  deps: BatchStartDeps & { pool: DatabasePool },
  batch: BatchRow,
  run: Pick<BatchStart, 'linesInFlight' | 'historyEventsPerRun'>,
  keyed: boolean,
): Promise<void> {
  try {
    await startBatchWorkflow(deps, batch, run);
  } catch (error) {
    if (await workflowExists(deps.temporal, batch.workflow_id)) return;
    // Without a key no retry can find it: it is taken back whole (nothing was charged), unless its
    // workflow has moved it on from `validating` meanwhile (Temporal could not say): then it runs.
    if (!keyed && (await deleteBatch(deps.pool, batch.id).catch(() => null)) === false) return;
    throw new ApiError(
      'service_unavailable',
      'The batch could not be started; send it again with the same Idempotency-Key.',
      { cause: error },
    );
  }
}

/** Within this, Temporal says whether a batch's workflow exists (the request waits for it). */
const existsDeadlineMs = 5_000;

/** Whether Temporal has the workflow (running or ended); false when it has not, or cannot say in time. */
async function workflowExists(temporal: Client, workflowId: string): Promise<boolean> {
  try {
    await temporal.withDeadline(Date.now() + existsDeadlineMs, () =>
      temporal.workflow.getHandle(workflowId).describe(),
    );
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a batch's workflow unless it runs or has run: its id is the batch's (the key's), a running
 * one is met, and one that has ended is not started again (it ended the batch). The batch's own
 * webhook subscription goes with it: the workflow starts its delivery, as a generation's does.
 * It runs on the batches queue (batchQueue: slots of its own, never a generation step's), at a
 * batch line's priority with its account as the fairness key: however many batches one account
 * opens, the slices of another account's batches are dispatched beside them, not behind them.
 * Its slices inherit both (activities run on their workflow's queue, at its priority).
 */
export async function startBatchWorkflow(
  deps: BatchStartDeps,
  batch: BatchRow,
  run: Pick<BatchStart, 'linesInFlight' | 'historyEventsPerRun'>,
): Promise<void> {
  const webhook = batch.webhook as { url: string; events: string[] } | null;
  const start: BatchStart = {
    batchId: batch.id,
    linesInFlight: run.linesInFlight,
    ...(run.historyEventsPerRun !== undefined && { historyEventsPerRun: run.historyEventsPerRun }),
    ...(webhook && { webhook: { ...webhook, retryDelaysMs: deps.webhooks?.retryDelaysMs ?? [] } }),
  };
  try {
    await deps.temporal.workflow.start('batchWorkflow', {
      workflowId: batch.workflow_id,
      taskQueue: batchQueue(deps.taskQueue),
      priority: batchLinePriority(batch.account_id),
      args: [start],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      staticSummary: `batch of ${batch.line_count} for ${batch.account_id}`,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
}
