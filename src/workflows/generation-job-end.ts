import type { ProviderJobEnd } from '../vocabulary/generation.js';
import type { cancelRules } from './generation-cancel.js';
import type { generationEndings } from './generation-endings.js';
import { generationErrors, whatFailed } from './generation-errors.js';
import type { trackProgress } from './generation-progress.js';
import type { generationSteps } from './generation-steps.js';
import type { GenerationProgress, GenerationStart } from './generation-types.js';

type Steps = ReturnType<typeof generationSteps>;
type WaitOutcome = ProviderJobEnd<unknown>;
type Endings = ReturnType<typeof generationEndings>;

/**
 * What the end of the provider's job comes to (part of the generation's active life): a failed
 * job refunded (or, stopped by a cancel once it ran, charged), a succeeded one persisted (its
 * gallery thumbnails are not the generation's: persist records its images as pending, and a sweep
 * on their own task queue makes them, thumbnailsWorkflow). Returns true when the generation succeeded.
 */
export function jobEndRules(
  start: GenerationStart,
  steps: Steps,
  rules: {
    cancel: ReturnType<typeof cancelRules>;
    enter: ReturnType<typeof trackProgress>['enter'];
    fail: Endings['fail'];
    giveUp: Endings['giveUp'];
    discardContent: Endings['discardContent'];
    progress: GenerationProgress;
  },
): (jobId: string, outcome: WaitOutcome) => Promise<boolean> {
  const { cancel, enter, fail, giveUp, discardContent, progress } = rules;

  /** The job's end: persisted (true) or failed, refunded or charged (false). */
  return async function settle(jobId: string, outcome: WaitOutcome): Promise<boolean> {
    if (outcome.state === 'failed') {
      // A cancel stopped it after the provider had started it: the provider bills the run, so the
      // debit stands (a cancel is free only before the run), and the client is told so.
      if (cancel.stoppedOrAsked && outcome.canceledWhileRunning) {
        await steps.endCharged(start.generationId, generationErrors.canceledWhileRunning);
        enter('failed', 'failed', 'failed: canceled while running (charged)');
        await discardContent();
        return false;
      }
      // A job a cancel stopped before it ran is reported failed: its refund is the cancel's, with its code.
      return fail(
        cancel.stoppedOrAsked
          ? generationErrors.canceled
          : outcome.rejected
            ? generationErrors.providerRejected
            : generationErrors.providerFailed(outcome.message),
      );
    }

    enter('persisting', 'queued', 'persisting results');
    try {
      const { expiresAt } = await steps.persistResults(
        { generationId: start.generationId, model: start.model, jobId, results: outcome.results },
        start.timing.resultRetentionMs,
      );
      progress.expiresAt = expiresAt;
    } catch (error) {
      return giveUp(error, whatFailed.persist);
    }
    enter('succeeded', 'succeeded', 'succeeded');
    return true;
  };
}
