import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  defineQuery,
  defineUpdate,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { GenerationActivities } from '../activities/generation-activities.js';
import {
  errorTypes,
  providerWaitQueue,
  type Admission,
  type AdmitResult,
  type GenerationError,
  type GenerationProgress,
  type GenerationStart,
  type GenerationStatus,
  type Resolution,
} from './generation-types.js';
import { GenerationStatus as GenerationStatusKey, NeedsReview } from './search-attributes.js';

/** POST /v1/generations: answers once admission is decided and an accepted job handed over (at once, for a repeat). */
export const admitUpdate = defineUpdate<AdmitResult>('admit');
/** Support's decision on a generation that needs review. */
export const resolveUpdate = defineUpdate<GenerationProgress, [Resolution]>('resolve');
/** Where the generation stands, as the workflow sees it. */
export const progressQuery = defineQuery<GenerationProgress>('progress');

const { admit } = proxyLocalActivities<GenerationActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' },
  summary: 'Admit: concurrency slot, price quote, debit',
});
/**
 * Creating a generation hands it to the provider (the spec's POST), so the first submission runs
 * while the POST waits, as a local activity in admission's workflow task: its answer (accepted,
 * rejected and refunded, or uncertain) is in the 202. It gets `submitTimeoutMs` per attempt, twice.
 */
const handoverActivities = (submitTimeoutMs: number) =>
  proxyLocalActivities<GenerationActivities>({
    startToCloseTimeout: submitTimeoutMs,
    retry: {
      initialInterval: '200 milliseconds',
      maximumAttempts: 2,
      nonRetryableErrorTypes: [errorTypes.providerRejection],
    },
    summary: 'Submit to the provider (once; a second attempt looks the job up)',
  });
/** A provider too slow to answer within the POST gets the job in the background, retried until it answers. */
const { submit: submitInBackground } = proxyActivities<GenerationActivities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '1 minute',
    nonRetryableErrorTypes: [errorTypes.providerRejection],
  },
  summary: 'Submit to the provider in the background (looks the job up before sending it again)',
});
/**
 * The provider wait runs on a task queue of its own, so waits that last minutes never take the
 * worker slots of short steps. It heartbeats once per poll, so its heartbeat timeout follows the
 * poll interval: a lost worker is noticed within three polls (10 s at least), and a slow poll
 * interval never times a healthy wait out.
 */
const waitingActivities = (pollIntervalMs: number) =>
  proxyActivities<GenerationActivities>({
    taskQueue: providerWaitQueue(workflowInfo().taskQueue),
    startToCloseTimeout: '6 hours',
    heartbeatTimeout: Math.max(10_000, 3 * pollIntervalMs),
    retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
    summary: 'Wait for the provider',
  });
const { persistResults } = proxyActivities<GenerationActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '2 minutes',
  // Persistence recovery: retried until the results are ours, however long the provider's storage misbehaves.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
  summary: 'Persist results into our storage',
});
const { refund, markNeedsReview, recordProviderJob, expireContent } = proxyActivities<GenerationActivities>({
  startToCloseTimeout: '30 seconds',
  // Retried until it commits: until then the generation stays queued with credits_refunded false.
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

const needsReviewError: GenerationError = {
  code: 'submission_unresolved',
  message:
    'The provider may have accepted this generation, but its answer was lost and it cannot tell us. Nothing was refunded yet. Contact support with this id before starting another generation.',
};

/**
 * One generation, from admission to the end of its idempotency horizon:
 *
 *   admit (debit) → submit [the POST answers here] → wait for the provider → persist results
 *   → succeeded → keep the results until expires_at → expire the content → hold the key until the horizon.
 *
 * A failure after the debit is refunded exactly once; an uncertain submission
 * waits for support instead of guessing. The workflow only decides; every
 * read and write happens in an activity.
 */
export async function generationWorkflow(start: GenerationStart): Promise<GenerationProgress> {
  // What the API indexed at start (queued, not needing review); upserted again only when it changes.
  const indexed: { status: GenerationStatus; needsReview: boolean } = {
    status: 'queued',
    needsReview: false,
  };
  const progress: GenerationProgress = {
    generationId: start.generationId,
    step: 'admitting',
    providerJobId: null,
    expiresAt: null,
  };
  const { waitForProvider } = waitingActivities(start.timing.pollIntervalMs);
  // A start from an API older than the handover has no submitTimeoutMs (a rolling deploy): 3 s, the default.
  const { submit } = handoverActivities(start.timing.submitTimeoutMs ?? 3_000);
  let admission: Promise<Admission> | undefined;
  const admitOnce = () => (admission ??= admit(start));
  let resolution: Resolution | undefined;
  // The POST answers once the generation is with the provider, has ended (refunded) or waits for support,
  // or once the provider proved too slow to answer within it.
  let submittingInBackground = false;
  const handedOver = () =>
    submittingInBackground || !['admitting', 'submitting', 'refunding'].includes(progress.step);

  const horizon = Date.parse(start.createdAt) + start.timing.idempotencyRetentionMs;
  setHandler(admitUpdate, async () => {
    const decided = await admitOnce();
    if (decided.outcome === 'accepted') await condition(handedOver);
    const holdsKey = decided.outcome === 'accepted' || decided.claimsKey;
    return {
      generationId: start.generationId,
      fingerprint: start.fingerprint,
      admission: decided,
      keyHeldUntil: new Date(holdsKey ? horizon : Date.parse(start.createdAt)).toISOString(),
    };
  });
  setHandler(progressQuery, () => progress);
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
  if (admitted.outcome === 'rejected') {
    enter('rejected', 'rejected', `rejected: ${admitted.error.code}`);
    // A rejection that does not claim the key ends the run now, so a retry with the same key starts afresh.
    if (admitted.claimsKey) await holdKeyUntilHorizon();
    await condition(allHandlersFinished);
    return progress;
  }

  const succeeded = await generate();
  if (succeeded && progress.expiresAt) {
    setCurrentDetails(`succeeded; results kept until ${progress.expiresAt}`);
    await sleep(Math.max(0, Date.parse(progress.expiresAt) - Date.now()));
    await expireContent(start.generationId);
    progress.step = 'expired';
    setCurrentDetails('content expired; holding the idempotency key');
  }
  await holdKeyUntilHorizon();
  await condition(allHandlersFinished);
  return progress;

  /** Submit, wait, persist. True when the generation succeeded; false when it ended failed (and refunded). */
  async function generate(): Promise<boolean> {
    enter('submitting', 'queued', 'submitting to the provider');
    let jobId: string;
    try {
      jobId = await handOver();
    } catch (error) {
      switch (failureType(error)) {
        case errorTypes.providerRejection:
          return fail({
            code: 'provider_rejected',
            message: 'The provider rejected this request. The credits were refunded.',
          });
        case errorTypes.providerUncertain: {
          const resolved = await waitForSupport();
          if (resolved === null) return false;
          jobId = resolved;
          break;
        }
        default:
          throw error;
      }
    }
    progress.providerJobId = jobId;
    enter('generating', 'queued', `generating (provider job ${jobId})`);
    const outcome = await waitForProvider({ model: start.model, jobId }, start.timing.pollIntervalMs);
    if (outcome.state === 'failed') return fail({ code: 'generation_failed', message: outcome.message });

    enter('persisting', 'queued', 'persisting results');
    const { expiresAt } = await persistResults(
      { generationId: start.generationId, model: start.model, jobId, results: outcome.results },
      start.timing.resultRetentionMs,
    );
    progress.expiresAt = expiresAt;
    enter('succeeded', 'succeeded', 'succeeded');
    return true;
  }

  /**
   * The provider's job id once it has the job. A rejection, or an acceptance it cannot confirm,
   * is final; any other failure (no answer in time) leaves the job to the background submission.
   */
  async function handOver(): Promise<string> {
    try {
      return (await submit(start)).jobId;
    } catch (error) {
      const type = failureType(error);
      if (type === errorTypes.providerRejection || (type === errorTypes.providerUncertain && isFinal(error)))
        throw error;
      submittingInBackground = true;
      setCurrentDetails('the provider is slow to accept; submitting in the background');
      return (await submitInBackground(start)).jobId;
    }
  }

  /** Failure after the debit: refund, retried until it commits, then failed. */
  async function fail(error: GenerationError): Promise<false> {
    enter('refunding', 'queued', `refunding: ${error.code}`);
    await refund(start.generationId, error);
    enter('failed', 'failed', `failed: ${error.code} (refunded)`);
    return false;
  }

  /** No speculative refund, no second submission: wait for support to say what happened. */
  async function waitForSupport(): Promise<string | null> {
    await markNeedsReview(start.generationId, needsReviewError);
    enter(
      'needs_review',
      'failed',
      'needs review: provider acceptance unknown; resolve with the support CLI',
      true,
    );
    await condition(() => resolution !== undefined);
    const decision = resolution!;
    if (decision.action === 'refund') {
      await fail({
        code: 'generation_failed',
        message: 'Support found this generation was not produced. The credits were refunded.',
      });
      return null;
    }
    await recordProviderJob(start.generationId, decision.providerJobId);
    return decision.providerJobId;
  }

  async function holdKeyUntilHorizon(): Promise<void> {
    const wait = horizon - Date.now();
    if (wait > 0) await sleep(wait);
  }

  function enter(
    step: GenerationProgress['step'],
    status: GenerationStatus,
    details: string,
    needsReview = false,
  ): void {
    progress.step = step;
    // Search attributes change with the status only (each upsert is a visibility write), not with every step.
    if (status !== indexed.status || needsReview !== indexed.needsReview) {
      upsertSearchAttributes([
        { key: GenerationStatusKey, value: status },
        { key: NeedsReview, value: needsReview },
      ]);
      indexed.status = status;
      indexed.needsReview = needsReview;
    }
    setCurrentDetails(details);
  }
}

/**
 * The ApplicationFailure an activity failed with, if any: the cause of an ActivityFailure, or the
 * failure itself when a local activity ran out of attempts (core resolves those unwrapped).
 */
function applicationFailureOf(error: unknown): ApplicationFailure | undefined {
  const failure = error instanceof ActivityFailure ? error.cause : error;
  return failure instanceof ApplicationFailure ? failure : undefined;
}

/** The ApplicationFailure type behind an activity failure, if any. */
function failureType(error: unknown): string | undefined {
  return applicationFailureOf(error)?.type ?? undefined;
}

/** Whether the activity said retrying cannot help (ApplicationFailure.nonRetryable). */
function isFinal(error: unknown): boolean {
  return applicationFailureOf(error)?.nonRetryable === true;
}
