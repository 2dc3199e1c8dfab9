import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  isCancellation,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
} from '@temporalio/workflow';
import { admissionErrors, generationErrors, whatFailed } from './generation-errors.js';
import { generationEndings } from './generation-endings.js';
import { imageStaging } from './generation-staging.js';
import { admitUpdate, cancelUpdate, progressQuery, resolveUpdate } from './generation-messages.js';
import { generationSteps } from './generation-steps.js';
import { startWebhookDeliveries, webhookNudges } from './generation-webhooks.js';
import {
  errorTypes,
  type Admission,
  type AdmissionDecision,
  type AdmitResult,
  type GenerationProgress,
  type GenerationResumed,
  type GenerationStart,
} from './generation-types.js';
import { defaultReviewHandOffMs, reviewRules } from './generation-review.js';
import { keepGeneration } from './generation-retention.js';
import { cancelRules, withCancelRequests } from './generation-cancel.js';
import { trackProgress } from './generation-progress.js';
import { jobEndRules } from './generation-job-end.js';
import { admissionFailure, failureMessage, failureType, isPermanent, isSettled } from './step-failures.js';

export { admitUpdate, cancelUpdate, progressQuery, resolveUpdate };

type WaitOutcome = Awaited<ReturnType<ReturnType<typeof generationSteps>['waitForProvider']>>;

/**
 * One generation's active life, from admission to its outcome:
 *
 *   admit (debit) → [fetch and store the customer's image URLs] → submit [the POST answers here]
 *   → wait for the provider → persist results → succeeded
 *
 * then it continues as new into its retention run (generation-retention.ts), which keeps the
 * results until expires_at and expires the content; a generation that needs review waits there
 * too. The active life is Pinned (minutes: it finishes on the build it started on, so a change to
 * it needs no patch); the retention run is Auto-Upgrade (see docs/developing.md).
 *
 * A generation that ends without success (refunded, rejected) has its files deleted at once, and
 * its run ends. Admission records a keyed generation's Idempotency-Key in PostgreSQL until its
 * horizon, so no run need stay open to hold it.
 *
 * A failure after the debit is refunded exactly once; an uncertain submission waits for support
 * instead of guessing. Every step is retried until its horizon (StepHorizons) and no longer: then
 * the generation is refunded, or goes to review where the provider may have run the job. The
 * workflow only decides; every read and write happens in an activity.
 */
export function generationWorkflow(
  start: GenerationStart,
  resumed?: GenerationResumed,
): Promise<GenerationProgress> {
  return withCancelRequests((requested) => generationStory(start, resumed, requested));
}
setWorkflowOptions({ versioningBehavior: 'PINNED' }, generationWorkflow);

/** The generation's story; `resumed`: support resolved its review with the provider's job; `cancelRequested`: see withCancelRequests. */
async function generationStory(
  start: GenerationStart,
  resumed: GenerationResumed | undefined,
  cancelRequested: Promise<never>,
) {
  const { progress, enter, stepAside } = trackProgress(start.generationId);
  // A subscribed generation's steps nudge its webhook deliveries; the run waits for the nudges to go.
  const nudges = webhookNudges(start);
  const steps = generationSteps(start.timing, nudges.nudge);
  const { fail, giveUp, settled, discardContent, cancelAtProvider } = generationEndings(start, steps, enter);
  const withImagesStaged = imageStaging(start, steps, { fail, giveUp });
  // A keyed generation records its key in PostgreSQL with its admission; the record answers for the
  // key until its horizon. Without an Idempotency-Key there is no key to hold.
  const keyed = start.idempotencyKey !== null;
  let admission: Promise<Admission> | undefined = resumed && Promise.resolve(resumed.admission);
  const admitOnce = () => (admission ??= admit());
  /** Why admission could not complete, when it was a bug: the run then ends failed, for operators to see. */
  let admissionBroke: string | undefined;
  // The POST answers once the generation is with the provider, has ended (refunded) or waits for support,
  // or once the provider proved too slow to answer within it.
  let submittingInBackground = false;
  const handedOver = () =>
    submittingInBackground || !['admitting', 'submitting', 'refunding'].includes(progress.step);

  const horizon = Date.parse(start.createdAt) + start.timing.idempotencyRetentionMs;
  /** Whether this generation holds its Idempotency-Key until the horizon (a retry with it is a replay). */
  const holdsKey = (decided: AdmissionDecision) =>
    keyed && (decided.outcome === 'accepted' || decided.claimsKey);
  /** What the admit update answers for this generation (its retention run answers the same). */
  const answerFor = (decided: AdmissionDecision): AdmitResult => ({
    generationId: start.generationId,
    fingerprint: start.fingerprint,
    admission: decided,
    keyHeldUntil: new Date(holdsKey(decided) ? horizon : Date.parse(start.createdAt)).toISOString(),
  });
  setHandler(admitUpdate, async () => {
    const decided = await admitOnce();
    if (decided.outcome === 'key_held') return decided.holder;
    if (decided.outcome === 'accepted') await condition(handedOver);
    return answerFor(decided);
  });
  setHandler(progressQuery, () => progress);
  const cancel = cancelRules(progress, (jobId) => steps.stopJobBeforeRun(jobId, start.generationId));
  setHandler(cancelUpdate, (generationId) => cancel.request(generationId));
  cancel.follow(cancelRequested);
  const review = reviewRules(start, steps, { progress, enter }, fail);
  const settle = jobEndRules(start, steps, { cancel, enter, fail, giveUp, discardContent, progress });
  /** The plan position submitted to last, and the job as staged (for a next route after a job that never started). */
  let routePosition = 0;
  let staged: GenerationStart | undefined;

  const admitted = await admitOnce();
  if (admitted.outcome === 'key_held') {
    // The key's record names an earlier generation: this run answered for it, and is no generation.
    stepAside(`answered for ${admitted.holder.generationId}, which holds the Idempotency-Key`);
    await condition(allHandlersFinished);
    return progress;
  }
  if (admitted.outcome === 'rejected') {
    enter('rejected', 'rejected', `rejected: ${admitted.error.code}`);
    // A refusal is an event of its own (generation.rejected), delivered to a subscription too.
    const rejectionDelivered = startWebhookDeliveries(start);
    // The inline images the API stored for it are not kept.
    if (start.inputPrefix !== null) await discardContent();
    await rejectionDelivered;
    await nudges.sent();
    await condition(allHandlersFinished);
    if (admissionBroke !== undefined)
      throw ApplicationFailure.nonRetryable(`admission failed: ${admissionBroke}`, 'AdmissionFailed');
    return progress;
  }

  const webhooks = startWebhookDeliveries(start);
  if (await generate()) await keep();
  await webhooks;
  await nudges.sent();
  await condition(allHandlersFinished);
  return progress;

  /** Succeeded or in review: the rest is the retention run's, on the current version. */
  async function keep(): Promise<never> {
    await webhooks;
    await nudges.sent();
    await condition(allHandlersFinished);
    return keepGeneration({ start, answer: answerFor(admitted as AdmissionDecision), progress });
  }

  /** Admission's decision, or a refusal when it could not complete (see admissionFailure). */
  async function admit(): Promise<Admission> {
    try {
      if (!keyed) return await steps.admit(start);
      const claim = { heldUntil: new Date(horizon).toISOString(), at: new Date(Date.now()).toISOString() };
      return await steps.admit(start, claim);
    } catch (error) {
      if (isCancellation(error)) throw error;
      const refusal = admissionFailure(error);
      if (refusal === admissionErrors.internal)
        admissionBroke = error instanceof Error ? error.message : String(error);
      return { outcome: 'rejected', error: refusal, claimsKey: false };
    }
  }

  /** Stage images, submit, wait, persist. True when the generation succeeded; false when it ended failed (and refunded). */
  async function generate(): Promise<boolean> {
    const first = resumed?.providerJobId ?? (await stageAndSubmit());
    if (first === null) return false;
    for (let waited = await waitFor(first); waited;) {
      const { jobId, outcome } = waited;
      // The provider says the job never started (Replicate `aborted`): the plan's next route, if any.
      const next = start.routes?.[routePosition + 1];
      const ended = {
        position: routePosition,
        jobId,
        reason: outcome.state === 'failed' ? outcome.message : '',
      };
      if (outcome.state !== 'failed' || !outcome.neverStarted || !next || !staged || cancel.stoppedOrAsked)
        return settle(jobId, outcome);
      if (!(await steps.leaveRoute(start.generationId, ended)).moved) return settle(jobId, outcome);
      setCurrentDetails(
        `route ${ended.position}: ${ended.reason} Trying route ${ended.position + 1} (${next.provider}).`,
      );
      enter('submitting', 'queued', 'submitting to the next route');
      const nextJob = await submit(staged, ended.position + 1);
      if (nextJob === null) return false;
      waited = await waitFor(nextJob);
    }
    return false;
  }

  /** The job run to its end at the provider (support may name another), or null when the generation ended instead. */
  async function waitFor(first: string): Promise<{ jobId: string; outcome: WaitOutcome } | null> {
    for (let jobId = first; ;) {
      progress.providerJobId = jobId;
      enter('generating', 'queued', `generating (provider job ${jobId})`);
      const job = jobId;
      try {
        const outcome = await cancel.duringWait(() =>
          steps.waitForProvider(
            { model: start.model, jobId: job, generationId: start.generationId },
            start.timing.pollIntervalMs,
          ),
        );
        return { jobId, outcome };
      } catch (error) {
        if (cancel.stopped) return fail(generationErrors.canceled).then(() => null);
        // A synchronous provider's call whose answer was lost: it may have run (and billed).
        if (failureType(error) !== errorTypes.providerUncertain) {
          await giveUp(error, whatFailed.providerWait);
          if (!isSettled(error)) await cancelAtProvider(job);
          return null;
        }
        const found = await waitForSupport();
        if (found === null) return null;
        jobId = found;
      }
    }
  }

  /** The job staged (the customer's images) and submitted: its id, or null when the generation ended instead. */
  async function stageAndSubmit(): Promise<string | null> {
    enter('submitting', 'queued', 'submitting to the provider');
    const job = await withImagesStaged(() => (submittingInBackground = true));
    staged = job ?? undefined;
    return job === null ? null : submit(job);
  }

  /**
   * The provider's job id once it has the job; null when the generation ended instead (rejected and
   * refunded, or settled before). An acceptance nobody can confirm waits for support.
   */
  async function submit(job: GenerationStart, position = 0): Promise<string | null> {
    routePosition = position;
    try {
      return (await handOver(job, position)).jobId;
    } catch (error) {
      if (isCancellation(error)) throw error;
      // The route proved it did not take the job, and its end is recorded: the plan's next route.
      const next = start.routes?.[position + 1];
      if (failureType(error) === errorTypes.routeNotAccepted && next) {
        setCurrentDetails(`${failureMessage(error)}; trying route ${position + 1} (${next.provider})`);
        return submit(job, position + 1);
      }
      if (isSettled(error)) {
        settled();
        return null;
      }
      switch (failureType(error)) {
        case errorTypes.providerRejection:
          await fail(generationErrors.providerRejected);
          return null;
        case errorTypes.providerUncertain:
          return waitForSupport();
      }
      if (isPermanent(error)) {
        await fail(generationErrors.cannotComplete(whatFailed.submit));
        return null;
      }
      // The submit horizon: a job the provider may have is not ours to refund.
      const state = await steps.submissionState(start.generationId);
      if (state.jobId) return state.jobId;
      if (state.mayHaveReachedProvider) return waitForSupport();
      await fail(generationErrors.timedOut(whatFailed.acceptance));
      return null;
    }
  }

  /**
   * The first submission while the POST waits; a rejection, or an acceptance the provider cannot
   * confirm, is final; any other failure (no answer in time) leaves the job to the background submission.
   */
  async function handOver(job: GenerationStart, position: number): Promise<{ jobId: string }> {
    // A submission is a quick hand-over (the POST waits on the first) until one fails to answer in
    // time; from then on every submission, of this route or a later one, goes to the background.
    if (submittingInBackground) return steps.submitInBackground(job, position);
    try {
      return await steps.handOver(job, position);
    } catch (error) {
      if (isCancellation(error) || isPermanent(error)) throw error;
      submittingInBackground = true;
      setCurrentDetails('the provider is slow to accept; submitting in the background');
      return steps.submitInBackground(job, position);
    }
  }

  /**
   * Support says what happened (see reviewRules): the provider's job to go on from, or null when it
   * refunded. A review that outlasts the hand-off continues as the review run, on the current version.
   */
  async function waitForSupport(): Promise<string | null> {
    await review.begin();
    const decided = await review.decision(start.timing.reviewHandOffMs ?? defaultReviewHandOffMs);
    return decided === undefined ? keep() : decided;
  }
}
