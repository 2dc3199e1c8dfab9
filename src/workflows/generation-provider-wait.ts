import {
  allHandlersFinished,
  condition,
  isCancellation,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { ProviderJobEnd } from '../generation.js';
import { providerJobEndedSignal } from './generation-messages.js';
import type { generationSteps } from './generation-steps.js';
import { errorTypes, type GenerationStart, type ProviderWaitPlan } from './generation-types.js';
import { failureType, isPermanent, isSettled } from './step-failures.js';

type Steps = ReturnType<typeof generationSteps>;

/**
 * Past this many events in its history, a run waiting for its provider continues as new (carrying
 * the wait) at its next read, so that the longest job's history stays bounded: a 6-hour job read
 * every 2 s (no push can come) makes about 10 events a read, 108,000 in all, beyond Temporal's
 * limit of 51,200; with a push expected (a read every 30 s) about 7,200. See docs/developing.md.
 */
export const waitHistoryEventLimit = 5_000;

/** A wait in progress, as a run carries it on when it continues as new. */
export interface WaitCarried {
  plan?: ProviderWaitPlan;
  /** When the wait for this job began (ms): its horizon counts from there, across runs. */
  since: number;
}

/** How a wait for the provider ended: the job's end, its horizon passed, or the run must continue as new. */
export type WaitEnd =
  { ended: ProviderJobEnd<unknown> } | { horizonPassed: true } | { continueAsNew: WaitCarried };

/**
 * Waiting for the provider's job, in the workflow: a running job holds no worker slot. The
 * provider's push (its verified webhook, or the simulated provider's own signal) wakes the run;
 * a short read (readProviderJob) then says what the job came to. Reads on a timer are the
 * fallback: with a push expected (`plan.push`), the first comes only after the model's expected
 * run time and a grace (`plan.firstReadMs`), the next every `plan.everyMs` (30 s); a push that
 * finds the job still running (a provider's read lagging its push) is read again after the poll
 * interval. Where no push can come (no PROVIDER_WEBHOOK_BASE_URL, OpenAI's synchronous calls, a
 * job support named), the reads keep the poll interval, from the start.
 */
export function providerWait(start: GenerationStart, steps: Steps) {
  /** Jobs whose end was pushed and not yet read. */
  const pushed = new Set<string>();
  setHandler(providerJobEndedSignal, ({ generationId, jobId }) => {
    // The workflow id may have moved on to a newer generation under the same Idempotency-Key.
    if (generationId === start.generationId) pushed.add(jobId);
  });
  const horizonMs = start.timing.horizons?.providerWaitMs ?? defaultProviderWaitMs;
  const eventLimit = start.timing.waitHistoryEventLimit ?? waitHistoryEventLimit;

  return {
    /** Reads `jobId` until it ends, its horizon passes, or the run's history asks to continue as new. */
    async until(jobId: string, carried: WaitCarried): Promise<WaitEnd> {
      const { plan, since } = carried;
      const pollMs = start.timing.pollIntervalMs;
      let nextReadMs = plan?.push ? plan.firstReadMs : 0;
      for (;;) {
        const remainingMs = since + horizonMs - Date.now();
        if (remainingMs <= 0) return { horizonPassed: true };
        if (!pushed.has(jobId) && nextReadMs > 0)
          await condition(() => pushed.has(jobId), Math.min(nextReadMs, remainingMs));
        const wasPushed = pushed.delete(jobId);
        const reason = wasPushed ? 'pushed' : plan?.push ? 'fallback' : 'poll';
        const local = plan?.shortReads === true;
        let read: Awaited<ReturnType<Steps['readProviderJob']>>;
        try {
          read = await steps.readProviderJob(
            { model: start.model, jobId, generationId: start.generationId },
            reason,
            Math.max(1_000, since + horizonMs - Date.now()),
            local,
          );
        } catch (error) {
          // A short read that failed (the provider did not answer, its budget said wait) is read
          // again at the next turn, sooner for a push; what no retry can fix ends the wait.
          if (!local || !mayReadAgain(error)) throw error;
          nextReadMs = wasPushed || !plan?.push ? pollMs : plan.everyMs;
          continue;
        }
        if (read.state !== 'running') return { ended: read };
        nextReadMs = !plan?.push || wasPushed ? pollMs : plan.everyMs;
        if (workflowInfo().historyLength > eventLimit && allHandlersFinished() && !pushed.has(jobId))
          return { continueAsNew: carried };
      }
    },
  };
}

const defaultProviderWaitMs = 6 * 3_600_000;

/** Whether a short read's failure may pass: not a cancellation, nor one no retry can fix, nor an uncertain call. */
function mayReadAgain(error: unknown): boolean {
  return (
    !isCancellation(error) &&
    !isPermanent(error) &&
    !isSettled(error) &&
    failureType(error) !== errorTypes.providerUncertain
  );
}
