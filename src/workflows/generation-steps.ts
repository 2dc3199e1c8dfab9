import { proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import {
  defaultStepHorizons,
  errorTypes,
  nonRetryableTypes,
  providerWaitQueue,
  type GenerationStart,
} from './generation-types.js';
import type { CancelActivities, GenerationActivities } from './contracts/generation.js';

/**
 * The generation workflow's steps and how each is retried. Every step retries what may pass
 * (an unreachable database, a slow provider) until its horizon, and never what cannot
 * (`nonRetryableTypes`, a provider's rejection); the workflow decides what giving up means.
 * `nudge` (a subscribed generation's: webhookNudge) is called after each step that may log an
 * event, however it ended, so that its webhook deliveries look at once.
 */
export function generationSteps(timing: GenerationStart['timing'], nudge?: () => void) {
  const horizon = { ...defaultStepHorizons, ...timing.horizons };
  const { debit, handOver, stageImages, submitInBackground } = handingOverSteps(timing, horizon);
  const { readProviderJob, persistResults, cancelJob, stopJobBeforeRun } = jobSteps(horizon);
  const {
    refund,
    endCharged,
    markNeedsReview,
    recordProviderJob,
    expireContent,
    discardContent,
    submissionState,
    leaveRoute,
  } = bookkeepingSteps(horizon);

  /** The step, followed by the nudge when it has settled. */
  const told = <A extends unknown[], R>(step: (...args: A) => Promise<R>) =>
    nudge ? (...args: A) => step(...args).finally(nudge) : step;

  return {
    // The debit comes before the deliveries start (they read the log first): no nudge.
    debit,
    stageImages: told(stageImages),
    cancelJob,
    stopJobBeforeRun,
    handOver: told(handOver),
    submitInBackground: told(submitInBackground),
    readProviderJob,
    persistResults: told(persistResults),
    refund: told(refund),
    endCharged: told(endCharged),
    markNeedsReview: told(markNeedsReview),
    recordProviderJob: told(recordProviderJob),
    expireContent: told(expireContent),
    discardContent: told(discardContent),
    submissionState,
    leaveRoute: told(leaveRoute),
  };
}

type StepHorizons = typeof defaultStepHorizons;

/** Getting the job to the provider: the debit, the hand-over within the POST, then in the background. */
function handingOverSteps(timing: GenerationStart['timing'], horizon: StepHorizons) {
  /**
   * The debit runs while the POST waits, so its horizon is seconds. The SDK's worker does not stop
   * a local activity's retries at its schedule-to-close timeout (seen with 1.24: attempts went on
   * a second apart), so the horizon is also an attempt count: the attempts whose backoff fits in it.
   */
  const debitRetry = { initialMs: 200, maximumMs: 1_000 };
  const { debit } = proxyLocalActivities<GenerationActivities>({
    startToCloseTimeout: horizon.admissionMs,
    scheduleToCloseTimeout: horizon.admissionMs,
    retry: {
      initialInterval: debitRetry.initialMs,
      maximumInterval: debitRetry.maximumMs,
      backoffCoefficient: 2,
      maximumAttempts: attemptsWithin(horizon.admissionMs, debitRetry),
      nonRetryableErrorTypes: nonRetryableTypes,
    },
    summary: 'Debit: concurrency slot, price quote, the credits taken',
  });

  /**
   * Creating a generation hands it to the provider (the spec's POST), so the first submission runs
   * while the POST waits, as a local activity in the debit's workflow task: its answer (accepted,
   * rejected and refunded, or uncertain) is in the 202. It gets `submitTimeoutMs` per attempt, twice.
   * A start from an API older than the handover has no submitTimeoutMs (a rolling deploy): 3 s.
   */
  const { submit: handOver } = proxyLocalActivities<GenerationActivities>({
    startToCloseTimeout: timing.submitTimeoutMs ?? 3_000,
    retry: {
      initialInterval: '200 milliseconds',
      maximumAttempts: 2,
      // A provider at its in-flight cap: no second try within the POST, the job waits in the background.
      nonRetryableErrorTypes: [errorTypes.providerRejection, errorTypes.providerBusy, ...nonRetryableTypes],
    },
    summary: 'Submit to the provider (once; a second attempt looks the job up)',
  });

  /**
   * The customer's own reference image URLs fetched and stored before the submit, in the background
   * (the POST answers `queued` meanwhile). Each fetch retries a failing host a few times itself, so
   * attempts here are for our own storage or a lost worker, until the submit horizon; a refused
   * image is final.
   */
  const { stageImages } = proxyActivities<GenerationActivities>({
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '1 minute',
    scheduleToCloseTimeout: horizon.submitMs,
    retry: {
      initialInterval: '1 second',
      maximumInterval: '1 minute',
      nonRetryableErrorTypes: [errorTypes.referenceImageRefused, ...nonRetryableTypes],
    },
    summary: 'Fetch and store the customer’s reference images',
  });

  /** A provider too slow to answer within the POST gets the job in the background, until the submit horizon. */
  const { submit: submitInBackground } = proxyActivities<GenerationActivities>({
    startToCloseTimeout: '1 minute',
    scheduleToCloseTimeout: horizon.submitMs,
    retry: {
      initialInterval: '1 second',
      maximumInterval: '1 minute',
      nonRetryableErrorTypes: [errorTypes.providerRejection, ...nonRetryableTypes],
    },
    summary: 'Submit to the provider in the background (looks the job up before sending it again)',
  });

  return { debit, handOver, stageImages, submitInBackground };
}

/** The job at the provider: reading it, the results persisted, and stopping it. */
function jobSteps(horizon: StepHorizons) {
  /**
   * One read of the job at the provider (the wait itself is the workflow's: generation-provider-wait.ts).
   * A status read (`local`: fal, Replicate, the simulated provider) is a local activity: a request
   * or two, within seconds (a turn of the request budget, the provider's answer), recorded as one
   * marker in the workflow task that asked for it; one that fails is not retried here: the wait
   * reads again at its next turn. A synchronous provider's read (OpenAI: the call itself, for up to
   * 10 minutes), or one of a job support named, runs on the provider-waits task queue, where it
   * takes no slot of the short steps; it says it is alive on a clock (every 5 s), so a lost worker
   * is noticed within 15 s, and is retried until the wait's horizon (`remainingMs`: what is left).
   */
  const readProviderJob = (
    generation: Parameters<GenerationActivities['readProviderJob']>[0],
    reason: Parameters<GenerationActivities['readProviderJob']>[1],
    remainingMs: number,
    local: boolean,
  ) =>
    local
      ? proxyLocalActivities<GenerationActivities>({
          startToCloseTimeout: '45 seconds',
          retry: { maximumAttempts: 1 },
          summary: `Read the job at the provider (${reason})`,
        }).readProviderJob(generation, reason)
      : proxyActivities<GenerationActivities>({
          taskQueue: providerWaitQueue(workflowInfo().taskQueue),
          startToCloseTimeout: '11 minutes',
          scheduleToCloseTimeout: Math.min(remainingMs, horizon.providerWaitMs),
          heartbeatTimeout: '15 seconds',
          retry: {
            initialInterval: '1 second',
            maximumInterval: '1 minute',
            nonRetryableErrorTypes: nonRetryableTypes,
          },
          summary: `Read the job at the provider (${reason})`,
        }).readProviderJob(generation, reason);

  /**
   * Persistence recovery: retried through the provider's storage misbehaving, up to its horizon. It
   * heartbeats on a clock every 10 s while it copies, so a lost worker is noticed within 30 s.
   */
  const { persistResults } = proxyActivities<GenerationActivities>({
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '30 seconds',
    scheduleToCloseTimeout: horizon.persistMs,
    retry: {
      initialInterval: '1 second',
      backoffCoefficient: 2,
      maximumInterval: '5 minutes',
      nonRetryableErrorTypes: nonRetryableTypes,
    },
    summary: 'Persist results into our storage',
  });

  /** Stopping a job we gave up on: best effort, a few attempts; the refund does not wait on it. */
  const { cancelJob } = proxyActivities<GenerationActivities>({
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '1 second', maximumAttempts: 5, nonRetryableErrorTypes: nonRetryableTypes },
    summary: 'Cancel the job at the provider',
  });

  /** A client's cancel asks the provider to stop a queued job: a few attempts, then it counts as not stopped. */
  const { stopJobBeforeRun } = proxyActivities<CancelActivities>({
    startToCloseTimeout: '10 seconds',
    scheduleToCloseTimeout: '30 seconds',
    retry: {
      initialInterval: '500 milliseconds',
      maximumAttempts: 4,
      nonRetryableErrorTypes: nonRetryableTypes,
    },
    summary: 'Stop the job at the provider before it runs (a cancel)',
  });

  return { readProviderJob, persistResults, cancelJob, stopJobBeforeRun };
}

/** Refunds and bookkeeping: until they commit the generation stays queued (credits_refunded false). */
function bookkeepingSteps(horizon: StepHorizons) {
  const {
    refund,
    endCharged,
    markNeedsReview,
    recordProviderJob,
    expireContent,
    discardContent,
    submissionState,
    leaveRoute,
  } = proxyActivities<GenerationActivities>({
    startToCloseTimeout: '30 seconds',
    scheduleToCloseTimeout: horizon.bookkeepingMs,
    retry: {
      initialInterval: '1 second',
      maximumInterval: '1 minute',
      nonRetryableErrorTypes: nonRetryableTypes,
    },
  });

  return {
    refund,
    endCharged,
    markNeedsReview,
    recordProviderJob,
    expireContent,
    discardContent,
    submissionState,
    leaveRoute,
  };
}

/** How many attempts fit in `horizonMs` when each waits the doubling backoff (capped) before it. */
function attemptsWithin(horizonMs: number, backoff: { initialMs: number; maximumMs: number }): number {
  let attempts = 1;
  for (let waited = 0, delay = backoff.initialMs; waited + delay <= horizonMs; attempts++) {
    waited += delay;
    delay = Math.min(delay * 2, backoff.maximumMs);
  }
  return attempts;
}
