import { ApplicationFailure, Context } from '@temporalio/activity';
import type { CommonQueryMethods } from 'slonik';
import { recordBatchEvent } from '../db/batch-events.js';
import { pruneLineRequests, putOffLine, takeLines } from '../db/batch-line-turns.js';
import {
  endPendingLines,
  lineStanding,
  queuedGenerationsOf,
  settleLine,
  type BatchLineInput,
} from '../db/batch-lines.js';
import { batchEventResource } from '../db/batch-view.js';
import { batchCounts, getBatch, setBatchStatus, type BatchRow } from '../db/batches.js';
import type { BatchActivities, BatchStanding } from '../workflows/contracts/batch.js';
import { webhookDeliveryWorkflowId, webhookNudgeSignalName } from '../workflows/webhook-delivery-types.js';
import type { ActivityDeps } from './activity-deps.js';
import type { BatchLineAdmission, BatchTiming } from './batch-line-admission.js';

export type { BatchLineAdmission, BatchTiming } from './batch-line-admission.js';

const defaultTiming: BatchTiming = { pollIntervalMs: 1_000, sliceMs: 30_000 };

/** How long a line whose admission could not be decided (`later`) waits before it is tried again. */
const defaultLaterRetryMs = 10_000;

/** How often a slice says it is alive, whatever it is doing: well within its 15 s heartbeat timeout. */
const aliveEveryMs = 3_000;

export function createBatchActivities(
  deps: Pick<ActivityDeps, 'db' | 'batchLines' | 'batchTiming'> &
    Partial<Pick<ActivityDeps, 'temporal' | 'batchLinesPerAccount'>>,
): BatchActivities {
  const { db } = deps;
  const nudge = webhookNudge(deps);
  const admission = () => {
    if (!deps.batchLines)
      throw ApplicationFailure.retryable('this worker was not given batch admission', 'BatchesNotWired');
    return deps.batchLines;
  };
  return {
    async startBatch(batchId) {
      await setBatchStatus(db, batchId, 'in_progress');
    },

    async runBatchSlice({ batchId, linesInFlight, cancelSent }) {
      const lines = admission();
      const timing = deps.batchTiming ?? defaultTiming;
      const context = Context.current();
      const until = Date.now() + timing.sliceMs;
      // Alive on a clock too (admitting a round of lines may take the admission timeout), so the
      // slice's short heartbeat timeout notices a lost worker in seconds, never a busy one.
      const alive = setInterval(() => context.heartbeat(), aliveEveryMs);
      try {
        let [seen, progressAt, admitted, capped] = ['', 0, 0, false];
        // The lines queued now and those this slice admits: a change to one wakes the slice early.
        const running = new Set(await queuedGenerationsOf(db, batchId));
        // Its exact count of pending lines only when it reports: each look counts no further than
        // it needs (whether a line is left to admit), whatever the batch's size.
        const report = async (canceling: boolean): Promise<BatchStanding> => {
          const { pending, queued } = await lineStanding(db, batchId);
          return { pending, queued, canceling };
        };
        for (;;) {
          context.heartbeat();
          const batch = await readBatch(db, batchId);
          const canceling = batch.status === 'canceling' || batch.status === 'canceled';
          if (canceling) await endPendingLines(db, batchId, 'canceled');
          else if (Date.now() >= Date.parse(batch.expires_at)) await endPendingLines(db, batchId, 'expired');
          let standing = await lineStanding(db, batchId, 1);
          // Once its lines have held or waited for a capped provider's place, the slice keeps to
          // that provider's pace: between two looks every line may have let its place go.
          capped ||= standing.holding + standing.waiting > 0;
          const room = admissionRoom({ ...standing, capped }, linesInFlight);
          if (!canceling && standing.pending > 0 && room > 0) {
            const round = await admitRound(db, lines, batch, {
              room,
              accountLimit: deps.batchLinesPerAccount ?? Number.MAX_SAFE_INTEGER,
              laterMs: timing.laterRetryMs ?? defaultLaterRetryMs,
            });
            for (const id of round.started) running.add(id);
            admitted += round.settled;
            standing = await lineStanding(db, batchId, 1);
          }
          const now = `${admitted}/${standing.queued}`;
          // Its counts read at most once a second (batch.progress is written at most that often).
          if (now !== seen && Date.now() - progressAt >= progressEveryMs) {
            if ((await recordProgress(db, batch)) !== null) nudge(batch);
            [seen, progressAt] = [now, Date.now()];
          }
          if (standing.pending === 0 && standing.queued === 0) return { pending: 0, queued: 0, canceling };
          if ((canceling && !cancelSent) || Date.now() + timing.pollIntervalMs >= until)
            return report(canceling);
          await untilLineChanges(context, lines, running, timing.pollIntervalMs);
        }
      } finally {
        clearInterval(alive);
      }
    },

    async cancelBatchGenerations(batchId) {
      const lines = admission();
      const batch = await readBatch(db, batchId);
      const running = await queuedGenerationsOf(db, batchId);
      for (const id of running) {
        context().heartbeat();
        await lines.cancel(id, batch.account_id);
      }
      return running.length;
    },

    async finishBatch(batchId) {
      const batch = await readBatch(db, batchId);
      const counts = await batchCounts(db, batch);
      const status =
        batch.status === 'canceling' || batch.status === 'canceled'
          ? 'canceled'
          : batch.status === 'expired' || counts.expired > 0
            ? 'expired'
            : 'completed';
      const ended = (await setBatchStatus(db, batchId, status))!;
      // Its lines' requests are of no more use: the results keep each line's outcome.
      await pruneLineRequests(db, batchId);
      await recordBatchEvent(db, batchId, `batch.${ended.status as typeof status}`, {
        ...batchEventResource(ended, await batchCounts(db, ended)),
      });
      // A retry nudges again: harmless (the delivery reads the log, and delivers each event once).
      nudge(ended);
      return ended.status;
    },
  };
}

const context = () => Context.current();

/** Lines a batch keeps waiting behind a capped provider's places, ready for the next one to free. */
const linesReadyForAPlace = 2;

/**
 * How many more lines a slice may admit now: up to `linesInFlight` queued; and once its lines have
 * held places of a capped provider or waited for one (`capped`), no more than the places held and
 * `linesReadyForAPlace` besides. A line admitted beyond them would only wait for a place, retrying
 * its submit every 2 s: work that the interactive generations beside it pay for. A provider
 * without a cap has no places to hold or wait for, so its lines go up to `linesInFlight`.
 */
export function admissionRoom(
  { queued, holding, capped }: { queued: number; holding: number; capped: boolean },
  linesInFlight: number,
): number {
  const room = linesInFlight - queued;
  return capped ? Math.min(room, holding + linesReadyForAPlace - queued) : room;
}

const progressEveryMs = 1_000;
/** Line ends close together wake a slice once: it reads its lines at most this often. */
const wakeEveryMs = 100;

/**
 * Until one of the slice's lines changes (when the worker is told of changes), or the poll interval
 * has passed; a cancel of the activity ends the wait. At least `wakeEveryMs` either way.
 */
async function untilLineChanges(
  context: Context,
  lines: BatchLineAdmission,
  running: ReadonlySet<string>,
  pollIntervalMs: number,
): Promise<void> {
  const started = Date.now();
  const poll = context.sleep(pollIntervalMs);
  if (!lines.waitForChange) return poll;
  await Promise.race([poll, lines.waitForChange(running, pollIntervalMs)]);
  const gap = Math.min(wakeEveryMs, pollIntervalMs) - (Date.now() - started);
  if (gap > 0) await context.sleep(gap);
}

async function readBatch(db: CommonQueryMethods, batchId: string): Promise<BatchRow> {
  const batch = await getBatch(db, null, batchId);
  if (!batch) throw ApplicationFailure.nonRetryable(`no batch ${batchId}`, 'BatchNotFound');
  return batch;
}

/**
 * One round of admission: the batch's lines whose turn it is (takeLines: up to `room`, within the
 * account's bound, lines put off passed over until they are due), each through admission at once.
 * The generations they started, and how many lines were settled.
 */
async function admitRound(
  db: ActivityDeps['db'],
  lines: BatchLineAdmission,
  batch: BatchRow,
  turn: { room: number; accountLimit: number; laterMs: number },
): Promise<{ started: string[]; settled: number }> {
  const next = await takeLines(db, {
    batchId: batch.id,
    accountId: batch.account_id,
    room: turn.room,
    accountLimit: turn.accountLimit,
  });
  const outcomes = await Promise.all(next.map((line) => admitLine(db, lines, batch, line, turn.laterMs)));
  return {
    started: outcomes.flatMap((outcome) => (outcome.generationId ? [outcome.generationId] : [])),
    settled: outcomes.filter((outcome) => outcome.settled).length,
  };
}

/**
 * One line through admission, its outcome written on the line (a `later` leaves it pending, put off
 * for `laterMs`: the lines behind it go first meanwhile); its generation's id when it has one.
 */
async function admitLine(
  db: CommonQueryMethods,
  lines: BatchLineAdmission,
  batch: BatchRow,
  line: BatchLineInput,
  laterMs: number,
): Promise<{ settled: boolean; generationId?: string }> {
  const admitted = await lines.admit({
    accountId: batch.account_id,
    apiKeyId: batch.api_key_id,
    batchId: batch.id,
    line,
  });
  if (admitted.outcome === 'started') {
    await settleLine(db, batch.id, line.line, { generationId: admitted.generationId });
    return { settled: true, generationId: admitted.generationId };
  }
  if (admitted.outcome === 'later') {
    await putOffLine(db, batch.id, line.line, laterMs);
    return { settled: false };
  }
  await settleLine(db, batch.id, line.line, { error: admitted.error });
  return { settled: true };
}

/**
 * What tells a subscribed batch's delivery workflow (`webhooks-<batch id>`) to look at its events
 * now: sent after an event is committed, not waited for, its failure ignored (a delivery workflow
 * not started yet reads the log when it starts; a lost nudge delays a delivery until the workflow's
 * own timer). A batch without a webhook gets none.
 */
function webhookNudge(deps: Partial<Pick<ActivityDeps, 'temporal'>>): (batch: BatchRow) => void {
  return (batch) => {
    if (!batch.webhook || !deps.temporal) return;
    void deps
      .temporal()
      .then((client) =>
        client.workflow.getHandle(webhookDeliveryWorkflowId(batch.id)).signal(webhookNudgeSignalName),
      )
      .catch(() => undefined);
  };
}

/** A `batch.progress` event with the batch's counts (at most one a second: see recordBatchEvent); its seq, or null. */
async function recordProgress(db: CommonQueryMethods, batch: BatchRow): Promise<number | null> {
  return recordBatchEvent(
    db,
    batch.id,
    'batch.progress',
    batchEventResource(batch, await batchCounts(db, batch)),
  );
}
