import { isCancellation } from '@temporalio/workflow';
import { generationErrors, whatFailed } from './generation-errors.js';
import type { generationEndings } from './generation-endings.js';
import type { routeFailover } from './generation-failover.js';
import type { handOverRules } from './generation-handover.js';
import { defaultReviewHandOffMs, type reviewRules } from './generation-review.js';
import type { generationSteps } from './generation-steps.js';
import { errorTypes, type GenerationStart, type SubmittedJob } from './generation-types.js';
import { failureType, isPermanent, isSettled } from './step-failures.js';

/** What the submission works with: the parts of the active run (generation-workflow.ts) it uses. */
export interface SubmissionRun {
  start: GenerationStart;
  steps: ReturnType<typeof generationSteps>;
  handOver: ReturnType<typeof handOverRules>;
  routes: ReturnType<typeof routeFailover>;
  review: ReturnType<typeof reviewRules>;
  fail: ReturnType<typeof generationEndings>['fail'];
  settled: ReturnType<typeof generationEndings>['settled'];
}

/**
 * Getting the job to a provider, and what follows when no route takes it: a rejection is refunded,
 * an acceptance nobody can confirm waits for support, and a review that outlasts its hand-off ends
 * the active run with `keep` (it continues as the review run).
 */
export function submission(run: SubmissionRun, keep: () => Promise<never>) {
  /**
   * The provider's job once route `position` (or a later one, when it refuses) has it; null when
   * the generation ended instead.
   */
  async function submit(job: GenerationStart, position: number): Promise<SubmittedJob | null> {
    try {
      return await run.handOver.submit(job, run.routes.enter(position));
    } catch (error) {
      if (isCancellation(error)) throw error;
      const next = run.routes.afterRefusal(error);
      return next === undefined ? submissionFailed(error) : submit(job, next);
    }
  }

  /**
   * A submission failed with no next route to take it: the provider's rejection is refunded, and so
   * is a Cancel-After deadline passed (as canceled); an acceptance nobody can confirm waits for
   * support; at the submit horizon, a job the provider may have is not ours to refund.
   */
  async function submissionFailed(error: unknown): Promise<SubmittedJob | null> {
    if (isSettled(error)) {
      run.settled();
      return null;
    }
    switch (failureType(error)) {
      case errorTypes.providerRejection:
        await run.fail(generationErrors.providerRejected);
        return null;
      case errorTypes.cancelAfterPassed:
        await run.fail(generationErrors.canceledByDeadline);
        return null;
      case errorTypes.providerUncertain:
        return supportNamed();
    }
    if (isPermanent(error)) {
      await run.fail(generationErrors.cannotComplete(whatFailed.submit));
      return null;
    }
    const state = await run.steps.submissionState(run.start.generationId);
    if (state.jobId) return { jobId: state.jobId };
    if (state.mayHaveReachedProvider) return supportNamed();
    await run.fail(generationErrors.timedOut(whatFailed.acceptance));
    return null;
  }

  /** The job support named after a review (read at the poll interval: no push is known to come), or null. */
  async function supportNamed(): Promise<SubmittedJob | null> {
    const found = await waitForSupport();
    return found === null ? null : { jobId: found };
  }

  /**
   * Support says what happened (see reviewRules): the provider's job to go on from, or null when it
   * refunded. A review that outlasts the hand-off continues as the review run, on the current version.
   */
  async function waitForSupport(): Promise<string | null> {
    await run.review.begin();
    const decided = await run.review.decision(run.start.timing.reviewHandOffMs ?? defaultReviewHandOffMs);
    return decided === undefined ? keep() : decided;
  }

  return { submit, waitForSupport };
}
