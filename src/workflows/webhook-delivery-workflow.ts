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
import { webhookQueue } from './generation-types.js';
import { webhookNudgeSignalName, type WebhookDeliveryStart } from './webhook-delivery-types.js';
import type {
  WebhookActivities,
  WebhookAttemptOutcome,
  WebhookEvents,
} from './contracts/webhook-delivery.js';

/** After a success, only content_expired (30 days on) can follow: looked for at its time, or this often. */
const expiryLookEveryMs = 3_600_000;
/**
 * With no nudge, the log is read again this often while the generation is under way (or in
 * review): an event logged where no workflow step nudges (the reconciliation sweep), or a nudge
 * lost, is delivered late, never lost.
 */
const lookAgainMs = 60_000;
/**
 * A delivery waiting for its account's turn asks again this often, unless woken sooner: the
 * attempt that gives a turn back wakes the waiters next in line (a lost wake-up costs this wait).
 */
const turnWaitMs = 30_000;
/** Rounds of looking before the run continues as new, so that its history stays short. */
const roundsPerRun = 100;

/**
 * Asks for one event (its number) to be delivered again, once, with its own webhook-id (sent by
 * redeliverWebhook, src/generations/redeliver-webhook.ts: the console's button, the admin command).
 */
export const redeliverWebhookSignal = defineSignal<[{ seq: number }]>('redeliverWebhook');

/**
 * Look again now: the generation logged an event (its workflow sends this after each step that
 * may log one: src/workflows/generation-webhooks.ts), or a turn of the account's deliveries was
 * given back. Carries nothing, so a repeat or a loss costs a read or a wait, never a delivery.
 */
export const webhookNudgeSignal = defineSignal(webhookNudgeSignalName);

/**
 * A generation's webhook deliveries (issue 30 §3), its own workflow apart from the generation's,
 * on its own task queue (`<queue>.webhooks`, with its activities): a slow or failing receiver, or
 * many deliveries, never delay a generation's steps or workflow tasks, and retries over days never
 * keep the generation's Pinned active run open. It takes the subscribed events from the event log
 * in order of their number, and delivers each before the next (in order, each once: the number it
 * reached travels into the next run). Between looks it waits here, holding no activity slot
 * (issue 35 §3): woken by a nudge (webhookNudgeSignal), or by a timer in case one was lost. The look
 * that finds events makes their first attempts itself (nextWebhookEvents with deliverFirst: no
 * round trip through Temporal after the look, issue 30's 500 ms); each retry is one activity (15 s
 * for the receiver), the waits before them timers here, on the spec's schedule, jittered. An
 * attempt goes in its account's turn (WEBHOOK_DELIVERIES_PER_ACCOUNT at once): until then it
 * waits here too. 410 Gone stops all deliveries for the generation. Redeliveries asked for
 * (redeliverWebhookSignal) run beside the scheduled ones, one attempt each, so one never waits
 * behind a receiver's retry schedule. Auto-Upgrade: it is long-lived, and runs on the current build.
 */
export async function webhookDeliveryWorkflow(start: WebhookDeliveryStart): Promise<void> {
  const { generationId } = start;
  // Its activities run on the webhooks queue: its own task queue, or (a run started on the
  // generation's queue, as before deliveries had a queue of their own) that queue's webhooks queue.
  const taskQueue = webhookQueue(workflowInfo().taskQueue);
  const { nextWebhookEvents } = proxyActivities<WebhookActivities>({
    taskQueue,
    startToCloseTimeout: '2 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts: 1 },
  });
  // The receiver has 15 s (the activity's own deadline); a worker lost mid-attempt is known in 30.
  const { deliverWebhook } = proxyActivities<WebhookActivities>({
    taskQueue,
    startToCloseTimeout: '30 seconds',
    retry: { maximumAttempts: 1 },
  });
  const { inTurn, nudgedOrAfter, nudgeCount } = turnsAndNudges(deliverWebhook);

  if (start.subscription) {
    // Recorded before anything is delivered (or redelivered, or shown); retried until it is.
    const { saveWebhookSubscription } = proxyActivities<WebhookActivities>({
      taskQueue,
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
        // Still waiting for a turn as the run must continue as new: the next run makes it.
        if ((await inTurn({ generationId, seq, redelivery: true })) === 'busy') return;
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
    // A nudge from here on is for what this look may not see.
    const seen = nudgeCount();
    let found: WebhookEvents;
    try {
      found = await nextWebhookEvents({ generationId, afterSeq, deliverFirst: true });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      // The database or the worker failed: look again shortly.
      await sleep(5_000);
      continue;
    }
    const reached = await deliverFound(found, afterSeq, (seq, made) =>
      deliverOne(
        start.retryDelaysMs,
        // The look found it not the account's turn: wait for one before asking again.
        (attempt) =>
          inTurn(
            { generationId, seq, attempt },
            attempt === 1 && made?.outcome === 'busy' ? seen : undefined,
          ),
        made?.attempt ?? 0,
      ),
    );
    afterSeq = reached.afterSeq;
    if (reached.outcome === 'busy') break;
    finished = reached.outcome === 'gone' || found.finished;
    // Found something: look again at once (more may have come meanwhile); else wait for a nudge.
    if (finished || found.events.length > 0) continue;
    await nudgedOrAfter(seen, found.onlyExpiryLeft ? untilExpiry(found.expiresAt) : lookAgainMs);
  }
  scheduledDone = true;
  await redelivering;
  if (!finished || redeliveries.length > 0)
    await continueAsNew<typeof webhookDeliveryWorkflow>({
      generationId,
      retryDelaysMs: start.retryDelaysMs,
      afterSeq,
      redeliveries,
    });
}
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookDeliveryWorkflow);

/**
 * The run's nudges (webhookNudgeSignal, counted) and its attempts made in their account's turn:
 * `inTurn` waits for the turn (a nudge, or turnWaitMs) while the attempt answers `busy` (first,
 * when `busySince` says the look that asked before found it busy: the nudge count then); it
 * answers `busy` itself only once the run's history is long enough that it should continue as
 * new first.
 */
function turnsAndNudges(deliverWebhook: WebhookActivities['deliverWebhook']) {
  let nudges = 0;
  setHandler(webhookNudgeSignal, () => void nudges++);
  /** Waits until a nudge comes after `seen` (the count when the wait's reason was read), or `ms`. */
  const nudgedOrAfter = (seen: number, ms: number) => condition(() => nudges !== seen, ms);
  const inTurn = async (
    attempt: Parameters<WebhookActivities['deliverWebhook']>[0],
    busySince?: number,
  ): Promise<WebhookAttemptOutcome['outcome']> => {
    if (busySince !== undefined) await nudgedOrAfter(busySince, turnWaitMs);
    for (;;) {
      const seen = nudges;
      const { outcome } = await deliverWebhook(attempt);
      if (outcome !== 'busy' || workflowInfo().continueAsNewSuggested) return outcome;
      await nudgedOrAfter(seen, turnWaitMs);
    }
  };
  return { inTurn, nudgedOrAfter, nudgeCount: () => nudges };
}

/**
 * The events a look found, each delivered (or given up on) in order: where it got to, and `gone`
 * (410: nothing more) or `busy` (it waited for a turn so long that the run continues as new
 * first: the event is delivered by the next run).
 */
async function deliverFound(
  found: WebhookEvents,
  afterSeq: number,
  deliver: (
    seq: number,
    made: NonNullable<WebhookEvents['firstAttempts']>[number] | undefined,
  ) => Promise<WebhookAttemptOutcome['outcome']>,
): Promise<{ afterSeq: number; outcome?: WebhookAttemptOutcome['outcome'] }> {
  let reached = afterSeq;
  for (const event of found.events) {
    // The look made the first attempts it could (none in histories from before it did).
    const made = found.firstAttempts?.find((a) => a.seq === event.seq);
    const outcome =
      made?.outcome === 'delivered' || made?.outcome === 'gone'
        ? made.outcome
        : await deliver(event.seq, made);
    if (outcome === 'gone' || outcome === 'busy') return { afterSeq: reached, outcome };
    reached = event.seq;
  }
  // Events not subscribed to are passed over too.
  return { afterSeq: Math.max(reached, found.throughSeq) };
}

/**
 * One event's delivery: attempts after the `made` ones (failed; made by the look) until one is
 * delivered, 410 or the schedule ends (or `busy`: see turnsAndNudges).
 */
async function deliverOne(
  retryDelaysMs: readonly number[],
  deliver: (attempt: number) => Promise<WebhookAttemptOutcome['outcome']>,
  made: number,
): Promise<WebhookAttemptOutcome['outcome']> {
  for (let attempt = made + 1; attempt <= retryDelaysMs.length + 1; attempt++) {
    if (attempt > 1) {
      const delay = retryDelaysMs[attempt - 2]!;
      // ±10 % jitter (Math.random is seeded, deterministic, in a workflow), so that retries spread.
      await sleep(Math.round(delay * (0.9 + Math.random() * 0.2)));
    }
    try {
      const outcome = await deliver(attempt);
      if (outcome !== 'failed') return outcome;
    } catch (error) {
      // A worker lost mid-attempt (it timed out) or a database failure: counted as a failed attempt.
      if (!(error instanceof ActivityFailure)) throw error;
    }
  }
  return 'failed';
}

/**
 * How long to wait before looking for content_expired: until the content's expiry (a second past
 * it), hourly once that time has passed (an expiry that failed and waits for support) or when it
 * is not known. The retention run's expiry nudges it at once.
 */
function untilExpiry(expiresAt: string | null | undefined): number {
  const left = expiresAt ? Date.parse(expiresAt) - Date.now() : NaN;
  return Number.isFinite(left) && left > 0 ? Math.min(left + 1_000, expiryLookEveryMs) : expiryLookEveryMs;
}
