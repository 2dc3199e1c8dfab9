import {
  makeContinueAsNewFunc,
  proxyActivities,
  setCurrentDetails,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import type { BatchActivities } from './contracts/batch.js';
import { startWebhookDeliveries } from './generation-webhooks.js';
import type { WebhookSubscription } from './webhook-delivery-types.js';

/*
 * One batch's workflow (issue 38): it keeps no lines in its history. Its activity reads the next
 * lines from PostgreSQL and admits each through the same admission as a POST (an Idempotency-Key
 * made of the batch's id and the line's index, so a retried or killed attempt never starts a line
 * twice), keeps at most `linesInFlight` of them queued, and waits there, heartbeating, for lines to
 * end, a cancel or the deadline. The workflow only loops over those slices, asks the running
 * lines to stop on a cancel, and continues as new long before its history grows large.
 *
 * Auto-Upgrade (issue 45 §4): a batch lives up to its completion window (7 days), and its state is
 * in PostgreSQL, so each of its tasks runs on the deployment's current build: a deploy that
 * replaces the workers never strands it. A change to the commands it issues must replay its
 * recorded histories, those of the build before included (docs/developing.md).
 */

/** What a batch's workflow is started with (and continues as new with). */
export interface BatchStart {
  batchId: string;
  /** Lines of this batch queued at once (BATCH_LINES_IN_FLIGHT when it was created). */
  linesInFlight: number;
  /** History events after which a run continues as new (BATCH_HISTORY_EVENTS_PER_RUN; absent: 2,000). */
  historyEventsPerRun?: number;
  /** Whether the running lines were already asked to stop (a cancel seen by an earlier run). */
  cancelSent?: boolean;
  /**
   * The batch's own subscription (POST /v1/batches `webhook`), absent without one: the first run
   * starts its delivery workflow (`webhooks-<batchId>`, the one generations use) with it.
   */
  webhook?: WebhookSubscription;
}

const { startBatch, cancelBatchGenerations, finishBatch } = proxyActivities<BatchActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

// A slice admits lines (each up to the admission timeout) and waits up to BATCH_SLICE_MS. It
// heartbeats on a clock as well, so a worker lost mid-slice holds the batch up for seconds only.
const { runBatchSlice } = proxyActivities<BatchActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '15 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/** Each slice adds a handful of events: a run continues as new well before its history is large. */
const defaultHistoryEventsPerRun = 2_000;

export async function batchWorkflow(start: BatchStart): Promise<string> {
  const { batchId } = start;
  let cancelSent = start.cancelSent ?? false;
  if (!start.cancelSent && workflowInfo().continuedFromExecutionRunId === undefined) {
    // Its events are delivered by a child that outlives it (started before its first event past
    // batch.created; that one is logged already and found by the child's first look).
    const delivering = startWebhookDeliveries({ generationId: batchId, webhook: start.webhook });
    await startBatch(batchId);
    await delivering;
  }
  for (;;) {
    const standing = await runBatchSlice({ batchId, linesInFlight: start.linesInFlight, cancelSent });
    setCurrentDetails(
      `pending ${standing.pending}, queued ${standing.queued}${standing.canceling ? ', canceling' : ''}`,
    );
    if (standing.canceling && !cancelSent) {
      await cancelBatchGenerations(batchId);
      cancelSent = true;
    }
    if (standing.pending === 0 && standing.queued === 0) break;
    const eventsPerRun = start.historyEventsPerRun ?? defaultHistoryEventsPerRun;
    if (workflowInfo().historyLength > eventsPerRun || workflowInfo().continueAsNewSuggested)
      await continueBatch({ ...start, cancelSent });
  }
  return finishBatch(batchId);
}
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, batchWorkflow);

/**
 * The next run of the batch: its first task on the current build, whatever build the run before
 * was on (a run an operator moved off a build that batches were Pinned to, say).
 */
const continueBatch = makeContinueAsNewFunc<typeof batchWorkflow>({
  workflowType: 'batchWorkflow',
  initialVersioningBehavior: 'AUTO_UPGRADE',
});
