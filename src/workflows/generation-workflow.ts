import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  setHandler,
  setWorkflowOptions,
} from '@temporalio/workflow';
import type { GenerationError, ProviderJobEnd } from '../vocabulary/generation.js';
import { generationErrors, whatFailed } from './generation-errors.js';
import { debitRules } from './generation-debit.js';
import { generationEndings } from './generation-endings.js';
import { handOverRules } from './generation-handover.js';
import { imageStaging } from './generation-staging.js';
import { admitUpdate, cancelUpdate, progressQuery, resolveUpdate } from './generation-messages.js';
import { routeFailover } from './generation-failover.js';
import { generationSteps } from './generation-steps.js';
import { providerWait, type WaitCarried } from './generation-provider-wait.js';
import { startWebhookDeliveries, webhookNudges } from './generation-webhooks.js';
import {
  errorTypes,
  type GenerationKept,
  type GenerationProgress,
  type GenerationResumed,
  type GenerationStart,
  type SubmittedJob,
} from './generation-types.js';
import { reviewRules } from './generation-review.js';
import { submission } from './generation-submission.js';
import { retentionStory } from './generation-retention.js';
import { cancelRules, withCancelRequests } from './generation-cancel.js';
import { trackProgress } from './generation-progress.js';
import { jobEndRules } from './generation-job-end.js';
import { failureType, isSettled } from './step-failures.js';

export { admitUpdate, cancelUpdate, progressQuery, resolveUpdate };

type WaitOutcome = ProviderJobEnd<unknown>;

/**
 * One generation's active life, from its debit to its outcome:
 *
 *   debit (the `admit` update waits for it) → [fetch and store the customer's image URLs] → submit [the POST answers here]
 *   → wait for the provider (its push, or a read on a timer) → persist results → succeeded
 *
 * then it continues as new into its retention run (generation-retention.ts), which keeps the
 * results until expires_at and expires the content; a generation that needs review waits there
 * too. The active life is Pinned (minutes: it finishes on the build it started on, so a change to
 * it needs no patch); the retention run is Auto-Upgrade (see docs/developing.md).
 *
 * A generation that ends without success (refunded, rejected) has its files deleted at once, and
 * its run ends. The debit records a keyed generation's Idempotency-Key in PostgreSQL until its
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

/**
 * The generation's retention run, which its active life continues as when it succeeded or needs
 * review: its story, and what a change to it needs, is generation-retention.ts's. Auto-Upgrade. Its
 * entry is here, beside generationWorkflow's, because each continues as the other.
 */
export function generationRetentionWorkflow(kept: GenerationKept): Promise<GenerationProgress> {
  return withCancelRequests((requested) => retentionStory(kept, requested, resumeGeneration));
}
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, generationRetentionWorkflow);

/** The active run's end when the generation succeeded or needs review: continue as its retention run. */
function keepGeneration(kept: GenerationKept): Promise<never> {
  return makeContinueAsNewFunc<typeof generationRetentionWorkflow>({
    workflowType: 'generationRetentionWorkflow',
    initialVersioningBehavior: 'AUTO_UPGRADE',
  })(kept);
}

/**
 * Support named the provider's job, or a long wait's history asked to continue as new: the active
 * life goes on from the wait, pinned to the current version.
 */
function resumeGeneration(start: GenerationStart, resumed: GenerationResumed): Promise<never> {
  return makeContinueAsNewFunc<typeof generationWorkflow>({
    workflowType: 'generationWorkflow',
    initialVersioningBehavior: 'AUTO_UPGRADE',
  })(start, resumed);
}

/**
 * The generation's story; `resumed`: support resolved its review with the provider's job;
 * `cancelRequested`: see withCancelRequests.
 */
async function generationStory(
  start: GenerationStart,
  resumed: GenerationResumed | undefined,
  cancelRequested: Promise<never>,
): Promise<GenerationProgress> {
  const run = activeRun(start, resumed, cancelRequested);
  const admitted = await run.debit.decided();
  if (admitted.outcome === 'key_held') return answeredForHolder(run, admitted.holder.generationId);
  if (admitted.outcome === 'rejected') return rejected(run, admitted.error);
  run.webhooks = startWebhookDeliveries(start);
  if (await generate(run)) await keep(run);
  await run.webhooks;
  await run.nudges.sent();
  await condition(allHandlersFinished);
  return run.progress;
}

/**
 * What one run of the active life works with: its progress, its steps, and the rules it follows,
 * each the owner of its own state (the debit, the hand-over, route failover, cancel, review, the
 * job's end); the run's update and query handlers are registered here, before anything waits.
 */
function activeRun(
  start: GenerationStart,
  resumed: GenerationResumed | undefined,
  cancelRequested: Promise<never>,
) {
  const { progress, enter, stepAside } = trackProgress(start.generationId);
  // A subscribed generation's steps nudge its webhook deliveries; the run waits for the nudges to go.
  const nudges = webhookNudges(start);
  const steps = generationSteps(start.timing, nudges.nudge);
  const endings = generationEndings(start, steps, enter);
  const handOver = handOverRules(steps, progress);
  const debit = debitRules(start, steps, resumed, handOver.handedOver);
  setHandler(progressQuery, () => progress);
  const cancel = cancelRules(progress, (jobId) => steps.stopJobBeforeRun(jobId, start.generationId));
  setHandler(cancelUpdate, (generationId) => cancel.request(generationId));
  cancel.follow(cancelRequested);
  const run = {
    start,
    resumed,
    progress,
    enter,
    stepAside,
    steps,
    nudges,
    ...endings,
    debit,
    handOver,
    cancel,
    review: reviewRules(start, steps, { progress, enter }, endings.fail),
    settle: jobEndRules(start, steps, { cancel, enter, progress, ...endings }),
    routes: routeFailover(start, steps, resumed?.route),
    wait: providerWait(start, steps),
    stageImages: imageStaging(start, steps, endings),
    /** The start of the webhook deliveries once admitted (settles once started; at once without a webhook). */
    webhooks: Promise.resolve<void>(undefined),
  };
  // One object: the submission's keep() sees the deliveries the story starts on it later.
  const whole: typeof run & ReturnType<typeof submission> = Object.assign(
    run,
    submission(run, () => keep(whole)),
  );
  return whole;
}
type ActiveRun = ReturnType<typeof activeRun>;
/** What keep() needs of a run (the run's submission keeps it too, before the run is whole). */
interface KeptRun {
  start: GenerationStart;
  progress: GenerationProgress;
  debit: ReturnType<typeof debitRules>;
  nudges: ReturnType<typeof webhookNudges>;
  webhooks: Promise<void>;
}

/** The key's record names an earlier generation: this run answered for it, and is no generation. */
async function answeredForHolder(run: ActiveRun, holderId: string): Promise<GenerationProgress> {
  run.stepAside(`answered for ${holderId}, which holds the Idempotency-Key`);
  await condition(allHandlersFinished);
  return run.progress;
}

/** Refused at the debit: nothing was charged, and the run ends (failed for operators when the debit broke). */
async function rejected(run: ActiveRun, error: GenerationError): Promise<GenerationProgress> {
  run.enter('rejected', 'rejected', `rejected: ${error.code}`);
  // A refusal is an event of its own (generation.rejected), delivered to a subscription too.
  const rejectionDelivered = startWebhookDeliveries(run.start);
  // The inline images the API stored for it are not kept.
  if (run.start.inputPrefix !== null) await run.discardContent();
  await rejectionDelivered;
  await run.nudges.sent();
  await condition(allHandlersFinished);
  // Its type and words are what operators search for (named before the debit had its word).
  if (run.debit.broke !== undefined)
    throw ApplicationFailure.nonRetryable(`admission failed: ${run.debit.broke}`, 'AdmissionFailed');
  return run.progress;
}

/** Succeeded or in review: the rest is the retention run's, on the current version. */
async function keep(run: KeptRun): Promise<never> {
  await run.webhooks;
  await run.nudges.sent();
  await condition(allHandlersFinished);
  return keepGeneration({ start: run.start, answer: run.debit.answer(), progress: run.progress });
}

/**
 * Stage images, submit, wait, persist; a job that never started moves to the plan's next route.
 * True when the generation succeeded; false when it ended failed (and refunded).
 */
async function generate(run: ActiveRun): Promise<boolean> {
  const { resumed } = run;
  let job = resumed ? { jobId: resumed.providerJobId, wait: resumed.wait?.plan } : await stageAndSubmit(run);
  let since = resumed?.wait?.since;
  while (job !== null) {
    const waited = await waitFor(run, job, since);
    since = undefined;
    if (waited === null) return false;
    const { outcome } = waited;
    const next = await run.routes.afterNeverStarted(waited.jobId, outcome, run.cancel.stoppedOrAsked);
    if (next === undefined) return run.settle(waited.jobId, outcome);
    run.enter('submitting', 'queued', 'submitting to the next route');
    job = await run.submit(next.job, next.position);
  }
  return false;
}

/**
 * The job run to its end at the provider (support may name another), or null when the generation
 * ended instead. `since`: when a wait carried over from an earlier run began.
 */
async function waitFor(
  run: ActiveRun,
  first: SubmittedJob,
  since?: number,
): Promise<{ jobId: string; outcome: WaitOutcome } | null> {
  const { progress, cancel } = run;
  for (let job = first; ;) {
    const { jobId } = job;
    progress.providerJobId = jobId;
    run.enter('generating', 'queued', `generating (provider job ${jobId})`);
    const carried: WaitCarried = { ...(job.wait ? { plan: job.wait } : {}), since: since ?? Date.now() };
    try {
      const end = await cancel.duringWait(() => run.wait.until(jobId, carried));
      if ('ended' in end) return { jobId, outcome: end.ended };
      if ('continueAsNew' in end) return continueWaiting(run, jobId, end.continueAsNew);
      await run.giveUp(new Error('the provider wait horizon passed'), whatFailed.providerWait);
      await run.cancelAtProvider(jobId);
      return null;
    } catch (error) {
      if (cancel.stopped) return run.fail(generationErrors.canceled).then(() => null);
      // A synchronous provider's call whose answer was lost: it may have run (and billed).
      if (failureType(error) !== errorTypes.providerUncertain) {
        await run.giveUp(error, whatFailed.providerWait);
        if (!isSettled(error)) await run.cancelAtProvider(jobId);
        return null;
      }
      const found = await run.waitForSupport();
      if (found === null) return null;
      job = { jobId: found };
      since = undefined;
    }
  }
}

/**
 * A long wait's history is due to continue as new (see waitHistoryEventLimit): once the webhook
 * deliveries and nudges are out and no handler runs, the active life goes on from the wait in a
 * new run, with the route, the staged job and the wait's plan and start.
 */
async function continueWaiting(run: ActiveRun, jobId: string, wait: WaitCarried): Promise<never> {
  await run.webhooks;
  await run.nudges.sent();
  await condition(allHandlersFinished);
  return resumeGeneration(run.start, {
    admission: run.debit.answer().admission,
    providerJobId: jobId,
    wait,
    route: run.routes.carried(),
  });
}

/** The job staged (the customer's images) and submitted, or null when the generation ended instead. */
async function stageAndSubmit(run: ActiveRun): Promise<SubmittedJob | null> {
  run.enter('submitting', 'queued', 'submitting to the provider');
  const job = await run.stageImages(() => run.handOver.toBackground());
  if (job === null) return null;
  run.routes.stage(job);
  return run.submit(job, 0);
}
