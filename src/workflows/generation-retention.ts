import { allHandlersFinished, condition, setCurrentDetails, setHandler, sleep } from '@temporalio/workflow';
import { generationEndings } from './generation-endings.js';
import { admitUpdate, cancelUpdate, progressQuery } from './generation-messages.js';
import { reviewRules } from './generation-review.js';
import { trackProgress } from './generation-progress.js';
import { generationSteps } from './generation-steps.js';
import { webhookNudges } from './generation-webhooks.js';
import type { GenerationKept, GenerationProgress, GenerationResumed } from './generation-types.js';

/**
 * The long part of a generation, after its active life: a success's results kept until expires_at
 * (30 days), then expired; or a generation in review, waiting for support (days, perhaps).
 *
 * The active life (generationWorkflow) is Pinned: it finishes on the build it started on. It then
 * continues as new into this run, same workflow id, search attributes and GenerationId, which
 * starts on the deployment's current version and is Auto-Upgrade: each of its tasks runs on the
 * version current then, so old versions drain in minutes, not months. What it answers (the admit
 * update of a repeated POST, cancel, the progress query, support's resolve) is what a run of this
 * workflow id answered before it continued. A change to this file meets runs that started on an
 * older build: it is the one place a patch may be needed (docs/developing.md).
 *
 * The story of generationRetentionWorkflow (whose entry is beside generationWorkflow's, in
 * generation-workflow.ts: each continues as the other, named by `typeof`). `resume`: support named
 * the provider's job, and the active life goes on from the wait.
 */
export async function retentionStory(
  { start, answer, progress: carried }: GenerationKept,
  cancelRequested: Promise<never>,
  resume: (start: GenerationKept['start'], resumed: GenerationResumed) => Promise<never>,
): Promise<GenerationProgress> {
  const inReview = carried.step === 'needs_review';
  // What the active run indexed (continue-as-new carried it): failed and in review, or succeeded.
  const { progress, enter } = trackProgress(start.generationId, {
    progress: carried,
    status: inReview ? 'failed' : 'succeeded',
    needsReview: inReview,
  });
  // A subscribed generation's steps nudge its webhook deliveries; the run waits for the nudges to go.
  const nudges = webhookNudges(start);
  const steps = generationSteps(start.timing, nudges.nudge);
  const { fail, expire } = generationEndings(start, steps, enter);
  const review = reviewRules(start, steps, { progress, enter }, fail);

  // A repeated POST with the generation's Idempotency-Key lands here (update-with-start, USE_EXISTING).
  setHandler(admitUpdate, () => Promise.resolve(answer));
  setHandler(progressQuery, () => progress);
  // Nothing here is cancelable: the job has ended at the provider, or support decides.
  setHandler(cancelUpdate, () =>
    Promise.resolve({ outcome: 'not_cancelable' as const, step: progress.step }),
  );
  void cancelRequested.catch(() =>
    setCurrentDetails(`cancellation requested, but not cancelable at ${progress.step}`),
  );

  if (inReview) {
    const jobId = await review.decision();
    if (typeof jobId === 'string') {
      progress.providerJobId = jobId;
      enter('generating', 'queued', `generating (provider job ${jobId}, named by support)`);
      await nudges.sent();
      await condition(allHandlersFinished);
      if (answer.admission.outcome !== 'accepted') throw new Error('only an accepted generation is reviewed');
      return resume(start, { admission: answer.admission, providerJobId: jobId });
    }
  } else {
    setCurrentDetails(`succeeded; results kept until ${progress.expiresAt}`);
    await sleep(Math.max(0, Date.parse(progress.expiresAt ?? start.createdAt) - Date.now()));
    await expire();
    // Content expiry that failed keeps the run open in operators' sight until the key's horizon.
    const holding = Date.parse(answer.keyHeldUntil) - Date.now();
    if (progress.step === 'expiry_failed' && holding > 0) await sleep(holding);
  }
  await nudges.sent();
  await condition(allHandlersFinished);
  return progress;
}
