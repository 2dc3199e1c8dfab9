import {
  ActivityFailure,
  condition,
  continueAsNew,
  defineSignal,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type {
  WebhookActivities,
  WebhookAttemptOutcome,
  WebhookDeliveryStart,
  WebhookEvents,
} from './webhook-delivery-types.js';

/** How long one look for new events waits for one (the activity polls the event log meanwhile). */
const lookTimeout = '2 minutes';
/** After a success, only content_expired (30 days on) can follow: looked for at its time, or this often. */
const expiryLookEveryMs = 3_600_000;
/** Rounds of looking before the run continues as new, so that its history stays short. */
const roundsPerRun = 100;

/**
 * Asks for one event (its number) to be delivered again, once, with its own webhook-id (sent by
 * redeliverWebhook, src/generations/redeliver-webhook.ts: the console's button, the admin command).
 */
export const redeliverWebhookSignal = defineSignal<[{ seq: number }]>('redeliverWebhook');

/**
 * A generation's webhook deliveries (issue 30 §3), its own workflow apart from the generation's,
 * so a slow or failing receiver never delays a generation's steps, and retries over days never
 * keep the generation's Pinned active run open. It takes the subscribed events from the event log
 * in order of their number, and delivers each before the next (in order, each once: the number it
 * reached travels into the next run). The look that finds events makes their first attempts
 * itself (nextWebhookEvents with deliverFirst: a new event reaches its receiver without a round
 * trip through Temporal, issue 30's 500 ms); each retry is one activity (15 s for the receiver),
 * the waits before them timers here, on the spec's schedule, jittered. 410 Gone stops all
 * deliveries for the generation. Redeliveries asked for (redeliverWebhookSignal) run beside the
 * scheduled ones, one attempt each, so one never waits behind a receiver's retry schedule.
 * Auto-Upgrade: it is long-lived, and runs on the current build.
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
  if (start.subscription) {
    // Recorded before anything is delivered (or redelivered, or shown); retried until it is.
    const { saveWebhookSubscription } = proxyActivities<WebhookActivities>({
      taskQueue: webhookTaskQueue(),
      startToCloseTimeout: '30 seconds',
    });
    await saveWebhookSubscription({ generationId, ...start.subscription });
  }
  const redeliveries = [...(start.redeliveries ?? [])];
  setHandler(redeliverWebhookSignal, ({ seq }) => {
    if (!redeliveries.includes(seq)) redeliveries.push(seq);
  });
  let scheduledDone = false;
  const redelivering = (async () => {
    for (;;) {
      await condition(() => redeliveries.length > 0 || scheduledDone);
      const seq = redeliveries[0];
      if (seq === undefined) return;
      try {
        await deliverWebhook({ generationId, seq, redelivery: true });
      } catch (error) {
        // One attempt, as asked; its failure is recorded by the activity when it got that far.
        if (!(error instanceof ActivityFailure)) throw error;
      }
      redeliveries.shift();
    }
  })();

  let afterSeq = start.afterSeq ?? 0;
  let finished = false;
  for (let round = 0; round < roundsPerRun && !finished; round++) {
    let found: WebhookEvents;
    try {
      found = await nextWebhookEvents({ generationId, afterSeq, deliverFirst: true });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // The database or the worker failed: look again shortly.
      await sleep(5_000);
      continue;
    }
    let gone = false;
    for (const event of found.events) {
      // The look made the first attempts it could (none in histories from before it did).
      const made = found.firstAttempts?.find((a) => a.seq === event.seq);
      gone =
        made?.outcome === 'gone' ||
        (made?.outcome !== 'delivered' &&
          (await deliverOne(
            generationId,
            event.seq,
            start.retryDelaysMs,
            deliverWebhook,
            made?.attempt ?? 0,
          )) === 'gone');
      if (gone) break;
      afterSeq = event.seq;
    }
    // Events not subscribed to are passed over too.
    if (!gone) afterSeq = Math.max(afterSeq, found.throughSeq);
    finished = gone || found.finished;
    if (!finished && found.onlyExpiryLeft) await sleep(untilExpiry(found.expiresAt));
  }
  scheduledDone = true;
  await redelivering;
  if (!finished)
    await continueAsNew<typeof webhookDeliveryWorkflow>({
      generationId,
      retryDelaysMs: start.retryDelaysMs,
      afterSeq,
      redeliveries: [],
    });
}
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookDeliveryWorkflow);

/**
 * How long to wait before looking for content_expired: until the content's expiry (a second past
 * it, then the look waits a minute for the event); hourly once that time has passed (an expiry
 * that failed and waits for support) or when it is not known.
 */
function untilExpiry(expiresAt: string | null | undefined): number {
  const left = expiresAt ? Date.parse(expiresAt) - Date.now() : NaN;
  return Number.isFinite(left) && left > 0 ? Math.min(left + 1_000, expiryLookEveryMs) : expiryLookEveryMs;
}

/**
 * One event's delivery: attempts after the `made` ones (failed; made by the look) until one is
 * delivered, 410 or the schedule ends.
 */
async function deliverOne(
  generationId: string,
  seq: number,
  retryDelaysMs: readonly number[],
  deliver: WebhookActivities['deliverWebhook'],
  made: number,
): Promise<WebhookAttemptOutcome['outcome']> {
  for (let attempt = made + 1; attempt <= retryDelaysMs.length + 1; attempt++) {
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
