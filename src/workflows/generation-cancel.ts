import { CancellationScope, condition, setCurrentDetails } from '@temporalio/workflow';
import type { GenerationProgress } from './generation-types.js';

/** What a cancel came to: the generation was stopped (failed, `canceled`, refunded), or it could not be. */
export interface CancelOutcome {
  outcome: 'canceled' | 'not_cancelable';
  /** The workflow's step when the decision was made, for operators and the message. */
  step: GenerationProgress['step'];
}

/**
 * The cancel rules, decided by the workflow so that a cancel racing the provider's completion, a
 * worker crash or a support reset can never refund a delivered result or refund twice: the refund
 * is the main flow's one `fail()` after the wait for the provider is stopped, never the cancel's own.
 *
 * - While the job is being handed over, the cancel waits until the provider has it (or the
 *   generation ended), then decides as below.
 * - While the provider has it, the provider is asked to stop it only if it never ran
 *   (Provider.stopBeforeRun). Stopped (the answer proves it never ran): the wait is cancelled and
 *   the main flow refunds with `canceled`. Not stopped: `not_cancelable`, nothing changes. Unknown
 *   (the answer does not prove it never ran, or was lost): the wait goes on, and its end decides.
 *   A job that ends failed at the provider while the ask is out or unknown was the cancel's:
 *   `canceled`, refunded, unless the provider says it had started it (`canceledWhileRunning`: it
 *   bills the run, so the debit stands); one that succeeded was not stopped.
 * - At any other step (persisting, refunding, needs review, terminal): `not_cancelable`.
 */
export function cancelRules(
  progress: GenerationProgress,
  stopBeforeRun: (jobId: string) => Promise<{ stopped: boolean | 'unknown' }>,
) {
  let stopped = false;
  /** A stop is being asked, or was and its answer lost: the job may be stopped; its end tells. */
  let stopAsked = false;
  let waiting: CancellationScope | null = null;
  let deciding: Promise<CancelOutcome> | null = null;
  const handingOver = () => progress.step === 'admitting' || progress.step === 'submitting';
  const failed = () => progress.step === 'failed';
  const jobEnded = () => failed() || progress.step === 'succeeded' || progress.step === 'needs_review';

  async function decide(): Promise<CancelOutcome> {
    await condition(() => !handingOver());
    if (!stopped) {
      const jobId = progress.providerJobId;
      if (progress.step !== 'generating' || jobId === null)
        return { outcome: 'not_cancelable', step: progress.step };
      stopAsked = true;
      const answer = await stopBeforeRun(jobId).catch(() => ({ stopped: 'unknown' as const }));
      if (answer.stopped === 'unknown') {
        await condition(jobEnded);
        return { outcome: failed() ? 'canceled' : 'not_cancelable', step: progress.step };
      }
      if (answer.stopped !== true) {
        stopAsked = false;
        // Ended failed while asked: refunded as canceled, which is what the client is told.
        return { outcome: failed() ? 'canceled' : 'not_cancelable', step: progress.step };
      }
      stopped = true;
      waiting?.cancel();
    }
    // The main flow refunds and ends failed; a result delivered meanwhile would stand (not canceled).
    await condition(() => failed() || progress.step === 'succeeded');
    return { outcome: failed() ? 'canceled' : 'not_cancelable', step: progress.step };
  }

  return {
    /** Whether a cancel stopped the job: the main flow then refunds with `canceled`. */
    get stopped(): boolean {
      return stopped;
    },
    /** Whether a job that ended failed at the provider was (or may have been) stopped by a cancel. */
    get stoppedOrAsked(): boolean {
      return stopped || stopAsked;
    },
    /** A cancel (the update, or a cancellation request on the run): concurrent ones share one decision. */
    request(generationId: string): Promise<CancelOutcome> {
      // The workflow id may have moved on to a newer generation under the same Idempotency-Key.
      if (generationId !== progress.generationId)
        return Promise.resolve({ outcome: 'not_cancelable', step: progress.step });
      deciding ??= decide().finally(() => {
        deciding = null;
      });
      return deciding;
    },
    /** A cancellation request on the run (see withCancelRequests) is one more cancel. */
    follow(cancelRequested: Promise<never>): void {
      cancelRequested.catch(async () => {
        const { outcome, step } = await this.request(progress.generationId);
        if (outcome === 'not_cancelable')
          setCurrentDetails(`cancellation requested, but not cancelable at ${step}`);
      });
    },
    /** Runs the wait for the provider where a stopping cancel can interrupt it. */
    async duringWait<T>(wait: () => Promise<T>): Promise<T> {
      waiting = new CancellationScope();
      try {
        return await waiting.run(wait);
      } finally {
        waiting = null;
      }
    },
  };
}

/**
 * "Request Cancellation" (Temporal UI, `temporal workflow cancel`) follows the cancel endpoint's
 * rules: the story runs non-cancellable as a whole, and the request is handed to it as one more
 * cancel.
 */
export function withCancelRequests<T>(story: (cancelRequested: Promise<never>) => Promise<T>): Promise<T> {
  const requested = CancellationScope.current().cancelRequested;
  return CancellationScope.nonCancellable(() => story(requested));
}
