import {
  ActivityFailure,
  continueAsNew,
  proxyActivities,
  setWorkflowOptions,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { WebhookAttemptOutcome, WebhookDeliveryStart, WebhookEvents } from './webhook-delivery-types.js';

/** The activities this workflow runs, on the webhooks queue (webhookQueue), none retried by Temporal. */
interface WebhookActivities {
  nextWebhookEvents(input: { generationId: string; afterSeq: number }): Promise<WebhookEvents>;
  deliverWebhook(input: {
    generationId: string;
    seq: number;
    attempt: number;
  }): Promise<WebhookAttemptOutcome>;
}

/** How long one look for new events waits for one (the activity polls the event log meanwhile). */
const lookTimeout = '2 minutes';
/** After a success, only content_expired (30 days on) can follow: looked for this often. */
const expiryLookEveryMs = 3_600_000;
/** Rounds of looking before the run continues as new, so that its history stays short. */
const roundsPerRun = 100;

/**
 * A generation's webhook deliveries (issue 30 §3): its own workflow, apart from the generation's,
 * so a slow or failing receiver never delays a generation's steps, and retries over days never
 * keep the generation's Pinned active run open. It takes the subscribed events from the event log
 * in order of their number, and delivers each before the next (in order, each once: the number it
 * reached travels into the next run). Each attempt is one activity (15 s for the receiver); the
 * waits between attempts are timers here, on the spec's schedule, jittered. 410 Gone stops all
 * deliveries for the generation. Auto-Upgrade: it is long-lived, and runs on the current build.
 */
export async function webhookDeliveryWorkflow(start: WebhookDeliveryStart): Promise<void> {
  const { generationId } = start;
  const { nextWebhookEvents } = proxyActivities<WebhookActivities>({
    taskQueue: webhookTaskQueue(),
    startToCloseTimeout: lookTimeout,
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts: 1 },
  });
  // The receiver has 15 s (the activity's own deadline); a worker lost mid-attempt is known in 30.
  const { deliverWebhook } = proxyActivities<WebhookActivities>({
    taskQueue: webhookTaskQueue(),
    startToCloseTimeout: '30 seconds',
    retry: { maximumAttempts: 1 },
  });
  let afterSeq = start.afterSeq ?? 0;
  for (let round = 0; round < roundsPerRun; round++) {
    let found: WebhookEvents;
    try {
      found = await nextWebhookEvents({ generationId, afterSeq });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // The database or the worker failed: look again shortly.
      await sleep(5_000);
      continue;
    }
    for (const event of found.events) {
      if ((await deliverOne(generationId, event.seq, start.retryDelaysMs, deliverWebhook)) === 'gone') return;
      afterSeq = event.seq;
    }
    // Events not subscribed to are passed over too.
    afterSeq = Math.max(afterSeq, found.throughSeq);
    if (found.finished) return;
    if (found.onlyExpiryLeft) await sleep(expiryLookEveryMs);
  }
  await continueAsNew<typeof webhookDeliveryWorkflow>({ ...start, afterSeq });
}
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookDeliveryWorkflow);

/** One event's delivery: attempts until one is delivered, 410 or the schedule ends. */
async function deliverOne(
  generationId: string,
  seq: number,
  retryDelaysMs: readonly number[],
  deliver: WebhookActivities['deliverWebhook'],
): Promise<WebhookAttemptOutcome['outcome']> {
  for (let attempt = 1; attempt <= retryDelaysMs.length + 1; attempt++) {
    if (attempt > 1) {
      const delay = retryDelaysMs[attempt - 2]!;
      // ±10 % jitter (Math.random is seeded, deterministic, in a workflow), so that retries spread.
      await sleep(Math.round(delay * (0.9 + Math.random() * 0.2)));
    }
    try {
      const { outcome } = await deliver({ generationId, seq, attempt });
      if (outcome !== 'failed') return outcome;
    } catch (error) {
      // A worker lost mid-attempt (it timed out) or a database failure: counted as a failed attempt.
      if (!(error instanceof ActivityFailure)) throw error;
    }
  }
  return 'failed';
}

/** The webhooks queue of the queue this run's workflow tasks come from. */
function webhookTaskQueue(): string {
  return `${workflowInfo().taskQueue}.webhooks`;
}
