import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  isCancellation,
  patched,
  setCurrentDetails,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import { admissionErrors, generationErrors, whatFailed } from './generation-errors.js';
import { generationEndings } from './generation-endings.js';
import { imageStaging } from './generation-staging.js';
import { admitUpdate, cancelUpdate, progressQuery, resolveUpdate } from './generation-messages.js';
import { generationSteps } from './generation-steps.js';
import {
  errorTypes,
  type Admission,
  type AdmissionDecision,
  type GenerationProgress,
  type GenerationStart,
  type Resolution,
} from './generation-types.js';
import { cancelRules, withCancelRequests } from './generation-cancel.js';
import { trackProgress } from './generation-progress.js';
import { admissionFailure, failureType, isPermanent, isSettled } from './step-failures.js';

export { admitUpdate, cancelUpdate, progressQuery, resolveUpdate };

/**
 * One generation, from admission to content expiry:
 *
 *   admit (debit) → [fetch and store the customer's image URLs] → submit [the POST answers here]
 *   → wait for the provider → persist results → succeeded → keep the results until expires_at
 *   → expire the content.
 *
 * A generation that ends without success (refunded, rejected) has its files deleted at once.
 *
 * Admission records a keyed generation's Idempotency-Key in PostgreSQL until its horizon, so the
 * run need not stay open to hold it (runs started before key records hold it until the horizon).
 *
 * A failure after the debit is refunded exactly once; an uncertain submission waits for support
 * instead of guessing. Every step is retried until its horizon (StepHorizons) and no longer: then
 * the generation is refunded, or goes to review where the provider may have run the job. The
 * workflow only decides; every read and write happens in an activity.
 */
export function generationWorkflow(start: GenerationStart): Promise<GenerationProgress> {
  return withCancelRequests((requested) => generationStory(start, requested));
}

/** The generation's story; `cancelRequested`: see withCancelRequests. */
async function generationStory(start: GenerationStart, cancelRequested: Promise<never> | null) {
  const { progress, enter, stepAside } = trackProgress(start.generationId);
  const steps = generationSteps(start.timing);
  const { fail, giveUp, settled, discardContent, cancelAtProvider, expire } = generationEndings(
    start,
    steps,
    enter,
  );
  const withImagesStaged = imageStaging(start, steps, { fail, giveUp });
  // Without an Idempotency-Key there is no key to hold: the run ends with the generation's story.
  // (Runs started before this rule held the key; they keep doing so when replayed.)
  const holdsNoKey = start.idempotencyKey === null && patched('keyless-runs-hold-no-key');
  // A keyed run records its key in PostgreSQL with its admission and ends after content expiry;
  // the record answers for the key until its horizon. (Runs started before key records were kept
  // hold their key open until the horizon; they keep doing so when replayed.)
  const keyInDatabase = start.idempotencyKey !== null && patched('key-record-in-database');
  let admission: Promise<Admission> | undefined;
  const admitOnce = () => (admission ??= admit());
  /** Why admission could not complete, when it was a bug: the run then ends failed, for operators to see. */
  let admissionBroke: string | undefined;
  let resolution: Resolution | undefined;
  // The POST answers once the generation is with the provider, has ended (refunded) or waits for support,
  // or once the provider proved too slow to answer within it.
  let submittingInBackground = false;
  const handedOver = () =>
    submittingInBackground || !['admitting', 'submitting', 'refunding'].includes(progress.step);

  const horizon = Date.parse(start.createdAt) + start.timing.idempotencyRetentionMs;
  /** Whether this generation holds its Idempotency-Key until the horizon (a retry with it is a replay). */
  const holdsKey = (decided: AdmissionDecision) =>
    !holdsNoKey && (decided.outcome === 'accepted' || decided.claimsKey);
  /**
   * Whether the run itself stays open until the horizon to hold the key: runs that predate key
   * records, and a run whose content expiry failed (it stays in operators' sight, needing review).
   */
  const holdsKeyOpen = (decided: AdmissionDecision) =>
    holdsKey(decided) && (!keyInDatabase || progress.step === 'expiry_failed');
  setHandler(admitUpdate, async () => {
    const decided = await admitOnce();
    if (decided.outcome === 'key_held') return decided.holder;
    if (decided.outcome === 'accepted') await condition(handedOver);
    return {
      generationId: start.generationId,
      fingerprint: start.fingerprint,
      admission: decided,
      keyHeldUntil: new Date(holdsKey(decided) ? horizon : Date.parse(start.createdAt)).toISOString(),
    };
  });
  setHandler(progressQuery, () => progress);
  const cancel = cancelRules(progress, (jobId) => steps.stopJobBeforeRun(jobId, start.generationId));
  setHandler(cancelUpdate, (generationId) => cancel.request(generationId));
  cancel.follow(cancelRequested);
  setHandler(
    resolveUpdate,
    async (decision) => {
      resolution = decision;
      await condition(() => progress.step !== 'needs_review');
      return progress;
    },
    {
      validator: (decision: Resolution) => {
        if (progress.step !== 'needs_review')
          throw new Error(`generation is ${progress.step}, not waiting for review`);
        if (decision.action === 'succeed' && !decision.providerJobId)
          throw new Error('succeed needs providerJobId');
      },
    },
  );

  const admitted = await admitOnce();
  if (admitted.outcome === 'key_held') {
    // The key's record names an earlier generation: this run answered for it, and is no generation.
    stepAside(`answered for ${admitted.holder.generationId}, which holds the Idempotency-Key`);
    await condition(allHandlersFinished);
    return progress;
  }
  if (admitted.outcome === 'rejected') {
    enter('rejected', 'rejected', `rejected: ${admitted.error.code}`);
    // The inline images the API stored for it are not kept.
    if (start.inputPrefix !== null) await discardContent();
    // A rejection that does not claim the key ends the run now, so a retry with the same key starts afresh.
    if (holdsKeyOpen(admitted)) await holdKeyUntilHorizon();
    await condition(allHandlersFinished);
    if (admissionBroke !== undefined)
      throw ApplicationFailure.nonRetryable(`admission failed: ${admissionBroke}`, 'AdmissionFailed');
    return progress;
  }

  const succeeded = await generate();
  if (succeeded && progress.expiresAt) {
    setCurrentDetails(`succeeded; results kept until ${progress.expiresAt}`);
    await sleep(Math.max(0, Date.parse(progress.expiresAt) - Date.now()));
    await expire(keyInDatabase);
  }
  if (holdsKeyOpen(admitted)) await holdKeyUntilHorizon();
  await condition(allHandlersFinished);
  return progress;

  /** Admission's decision, or a refusal when it could not complete (see admissionFailure). */
  async function admit(): Promise<Admission> {
    try {
      if (!keyInDatabase) return await steps.admit(start);
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
    enter('submitting', 'queued', 'submitting to the provider');
    const job = await withImagesStaged(() => (submittingInBackground = true));
    if (job === null) return false;
    let jobId = await submit(job);
    if (jobId === null) return false;
    let outcome: Awaited<ReturnType<typeof steps.waitForProvider>>;
    for (;;) {
      progress.providerJobId = jobId;
      enter('generating', 'queued', `generating (provider job ${jobId})`);
      const job = jobId;
      try {
        outcome = await cancel.duringWait(() =>
          steps.waitForProvider(
            { model: start.model, jobId: job, generationId: start.generationId },
            start.timing.pollIntervalMs,
          ),
        );
        break;
      } catch (error) {
        if (cancel.stopped) return fail(generationErrors.canceled);
        // A synchronous provider's call whose answer was lost: it may have run (and billed).
        if (failureType(error) === errorTypes.providerUncertain && patched('uncertain-wait-to-review')) {
          jobId = await waitForSupport();
          if (jobId === null) return false;
          continue;
        }
        const gaveUp = await giveUp(error, whatFailed.providerWait);
        if (!isSettled(error) && patched('cancel-at-provider-on-give-up')) await cancelAtProvider(jobId);
        return gaveUp;
      }
    }
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
  }

  /**
   * The provider's job id once it has the job; null when the generation ended instead (rejected and
   * refunded, refunded by support, or settled before). An acceptance nobody can confirm waits for support.
   */
  async function submit(job: GenerationStart): Promise<string | null> {
    try {
      return (await handOver(job)).jobId;
    } catch (error) {
      if (isCancellation(error)) throw error;
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
  async function handOver(job: GenerationStart): Promise<{ jobId: string }> {
    try {
      return await steps.handOver(job);
    } catch (error) {
      if (isCancellation(error) || isPermanent(error)) throw error;
      submittingInBackground = true;
      setCurrentDetails('the provider is slow to accept; submitting in the background');
      return steps.submitInBackground(job);
    }
  }

  /** No speculative refund, no second submission: wait for support to say what happened. */
  async function waitForSupport(): Promise<string | null> {
    await steps.markNeedsReview(start.generationId, generationErrors.submissionUnresolved);
    enter(
      'needs_review',
      'failed',
      'needs review: provider acceptance unknown; resolve with the support CLI',
      true,
    );
    await condition(() => resolution !== undefined);
    const decision = resolution!;
    resolution = undefined;
    if (decision.action === 'refund') {
      await fail(generationErrors.refundedBySupport);
      return null;
    }
    await steps.recordProviderJob(start.generationId, decision.providerJobId);
    return decision.providerJobId;
  }

  async function holdKeyUntilHorizon(): Promise<void> {
    const wait = horizon - Date.now();
    if (wait > 0) await sleep(wait);
  }
}
