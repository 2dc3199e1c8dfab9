import { heartbeat } from '@temporalio/activity';
import {
  generationEventsAfter,
  type GenerationEventRow,
  type GenerationEventType,
} from '../db/generation-events.js';
import {
  attemptsMadeFor,
  generationWebhookOf,
  lastAttemptOf,
  markStoppedByGoneUrl,
  markWebhookGone,
  recordDeliveryAttempt,
  saveGenerationWebhook,
  webhookBody,
} from '../db/generation-webhooks.js';
import { giveBackDeliveryTurn, takeDeliveryTurn } from '../db/webhook-delivery-turns.js';
import { webhookSecretOf } from '../db/webhook-secrets.js';
import { OutboundFetchError } from '../net/outbound-fetch-error.js';
import { outboundPost } from '../net/outbound-post.js';
import { newWebhookSecret, signWebhook } from '../webhook-signing.js';
import type {
  WebhookActivities,
  WebhookAttempt,
  WebhookAttemptOutcome,
  WebhookEvents,
  WebhookLook,
} from '../workflows/webhook-delivery-types.js';
import {
  webhookDeliveryWorkflowId,
  webhookMessageId,
  webhookNudgeSignalName,
} from '../workflows/webhook-delivery-types.js';
import type { ActivityDeps } from './activity-deps.js';

/**
 * Whether nothing more can happen to a generation after this event: a rejection, a failure that
 * is not in review (support may still resume or refund one that is), its content expired.
 * A success is over too unless its content_expired is subscribed to (it follows, days later).
 */
function isFinal(event: GenerationEventRow): boolean {
  const { generation } = event;
  return (
    generation.content_expired ||
    generation.status === 'rejected' ||
    (generation.status === 'failed' && !generation.needs_review)
  );
}
/**
 * A look starts no first attempt after this long (one more fits, 15 s for the receiver, in its
 * 2-minute deadline): the workflow attempts the rest.
 */
const firstAttemptsForMs = 90_000;
/** The receiver's time for one attempt. */
const receiverTimeoutMs = 15_000;
/** How long an attempt holds its account's turn at most (a worker lost mid-attempt gives it back then). */
const turnLeaseMs = 60_000;
/** WEBHOOK_DELIVERIES_PER_ACCOUNT's default. */
export const defaultDeliveriesPerAccount = 20;

/** The webhook delivery workflow's activities; they run on the webhooks queue (webhookQueue). */
export function createWebhookActivities(deps: ActivityDeps): WebhookActivities {
  const { db } = deps;
  const policy = deps.webhookDelivery ?? { allowCidrs: [] };
  const turnsPerAccount = deps.webhookDeliveriesPerAccount ?? defaultDeliveriesPerAccount;

  /** One read of the log: the subscribed events after `afterSeq`, and whether more can come. */
  async function look(input: { generationId: string; afterSeq: number }): Promise<WebhookEvents> {
    const webhook = await generationWebhookOf(db, input.generationId);
    // Its URL answered 410 since it was made (to this or another generation's delivery): stopped.
    if (webhook?.urlGoneAt && !webhook.gone) await markStoppedByGoneUrl(db, input.generationId);
    if (!webhook || webhook.gone || webhook.urlGoneAt)
      return { events: [], throughSeq: input.afterSeq, finished: true, onlyExpiryLeft: false };
    const all = await generationEventsAfter(db, input.generationId, input.afterSeq, {
      withNewest: true,
    });
    const after = all.filter((event) => event.seq > input.afterSeq);
    const newest = all.at(-1);
    const subscribed = new Set<string>(webhook.events);
    const events = after
      .filter((event) => subscribed.has(event.type))
      .map(({ seq, type }) => ({ seq, type }));
    const throughSeq = after.at(-1)?.seq ?? input.afterSeq;
    const succeeded = newest?.generation.status === 'succeeded' && !newest.generation.content_expired;
    const finished =
      newest !== undefined &&
      (isFinal(newest) ||
        (succeeded && !subscribed.has('generation.content_expired' satisfies GenerationEventType)));
    // The log read to its end (a very long one is read on by the next look).
    const complete = newest === undefined || throughSeq >= newest.seq;
    return {
      events,
      throughSeq,
      finished: complete && finished,
      onlyExpiryLeft: complete && !finished && succeeded,
      expiresAt: newest?.generation.expires_at ?? null,
    };
  }

  /**
   * Takes a turn of the account's for `holder`'s attempt: true when it may go now; false when as
   * many of its account's attempts run already (WEBHOOK_DELIVERIES_PER_ACCOUNT), or older ones wait.
   */
  const takeTurn = (accountId: string, generationId: string, holder: string) =>
    takeDeliveryTurn(db, { accountId, generationId, holder, cap: turnsPerAccount, leaseMs: turnLeaseMs });

  /** Gives the turn back, and wakes the deliveries of the account's waiters that may take one now. */
  async function giveBackTurn(accountId: string, holder: string): Promise<void> {
    const next = await giveBackDeliveryTurn(db, accountId, holder, turnsPerAccount);
    if (next.length === 0) return;
    const client = await deps.temporal();
    // A waiter whose workflow ended, or a signal Temporal did not take: it asks again on its own timer.
    await Promise.allSettled(
      [...new Set(next)].map((generationId) =>
        client.workflow.getHandle(webhookDeliveryWorkflowId(generationId)).signal(webhookNudgeSignalName),
      ),
    );
  }

  /** One attempt to deliver event `seq` (deliverWebhook). */
  async function attempt(input: WebhookAttempt): Promise<WebhookAttemptOutcome> {
    const webhook = await generationWebhookOf(db, input.generationId);
    if (!webhook) return { outcome: 'gone' };
    // A redelivery was asked for by the owner or support: it is tried even after a 410.
    const sent = input.redelivery || !(webhook.gone || webhook.urlGoneAt);
    const holder = `${input.generationId}/${input.seq}${input.redelivery ? '/redelivery' : ''}`;
    if (sent && !(await takeTurn(webhook.accountId, input.generationId, holder))) return { outcome: 'busy' };
    try {
      return await attemptWith(webhook, input);
    } finally {
      // Not given back (the database failed): it lapses with its lease.
      await giveBackTurn(webhook.accountId, holder).catch(() => undefined);
    }
  }

  /** An attempt (its turn taken) to deliver event `seq` to `webhook`. */
  async function attemptWith(
    webhook: NonNullable<Awaited<ReturnType<typeof generationWebhookOf>>>,
    input: WebhookAttempt,
  ): Promise<WebhookAttemptOutcome> {
    if (webhook.gone && !input.redelivery) return { outcome: 'gone' };
    const [event] = await generationEventsAfter(db, input.generationId, input.seq - 1, { limit: 1 });
    if (!event || event.seq !== input.seq) throw new Error(`event ${input.seq} not found`);
    if (webhook.urlGoneAt && !input.redelivery) {
      // The URL answered 410 to another delivery since this subscription was made: not sent, and
      // recorded as this attempt's end (a pending retry, or an event found before the 410).
      await recordDeliveryAttempt(db, {
        generationId: input.generationId,
        eventSeq: event.seq,
        eventType: event.type,
        webhookId: webhookMessageId(input.generationId, input.seq),
        attempt: input.attempt,
        url: webhook.url,
        status: null,
        latencyMs: 0,
        outcome: 'gone',
        error: `not sent: the URL answered 410 Gone at ${webhook.urlGoneAt}`,
      });
      await markStoppedByGoneUrl(db, input.generationId);
      return { outcome: 'gone' };
    }
    const body = Buffer.from(webhookBody(event), 'utf8');
    // The account's secret is made on first use, as GET /v1/webhooks/secret would make it.
    const secret = await webhookSecretOf(db, webhook.accountId, newWebhookSecret());
    const secrets = [secret.secret, ...(secret.previous ? [secret.previous.secret] : [])];
    const id = webhookMessageId(input.generationId, input.seq);
    const headers = signWebhook({ id, timestamp: Math.floor(Date.now() / 1000), body }, secrets);
    const started = performance.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      status = await outboundPost(
        webhook.url,
        { body, headers: { ...headers, 'content-type': 'application/json' } },
        // The URL's name is resolved, and its addresses checked, again at each attempt (DNS can change).
        { timeoutMs: receiverTimeoutMs, ...policy },
      );
    } catch (failure) {
      error = failure instanceof OutboundFetchError ? failure.message : String(failure);
    }
    const outcome =
      status !== null && status >= 200 && status < 300 ? 'delivered' : status === 410 ? 'gone' : 'failed';
    if (outcome === 'failed' && status !== null) error = `the receiver answered ${status}`;
    await recordDeliveryAttempt(db, {
      generationId: input.generationId,
      eventSeq: event.seq,
      eventType: event.type,
      webhookId: id,
      attempt: input.redelivery
        ? (await lastAttemptOf(db, input.generationId, input.seq)) + 1
        : input.attempt,
      url: webhook.url,
      status,
      latencyMs: performance.now() - started,
      outcome,
      error,
    });
    if (outcome === 'gone') await markWebhookGone(db, input.generationId);
    return { outcome };
  }

  /**
   * The first attempt of each event found, in order, made by the look that found them (one
   * activity, no round trip through Temporal between finding an event and sending it). It stops at
   * the first event not delivered (the workflow retries it on its schedule, and the rest wait
   * behind it), and once the look has run 90 s (the workflow attempts the rest). An event tried
   * before, by a look whose worker was lost, is not tried again: reported delivered, or handed to
   * the workflow's retries from its last attempt.
   */
  async function deliverFirst(
    generationId: string,
    events: WebhookEvents['events'],
    started: number,
  ): Promise<NonNullable<WebhookEvents['firstAttempts']>> {
    const made: NonNullable<WebhookEvents['firstAttempts']> = [];
    for (const { seq } of events) {
      if (Date.now() - started > firstAttemptsForMs) break;
      const before = await attemptsMadeFor(db, generationId, seq);
      if (before.delivered) {
        made.push({ seq, attempt: before.last, outcome: 'delivered' });
        continue;
      }
      if (before.last > 0) {
        made.push({ seq, attempt: before.last, outcome: 'failed' });
        break;
      }
      heartbeat();
      const { outcome } = await attempt({ generationId, seq, attempt: 1 });
      // Not its account's turn: the workflow makes the first attempt once it is.
      made.push(outcome === 'busy' ? { seq, attempt: 0, outcome } : { seq, attempt: 1, outcome });
      if (outcome !== 'delivered') break;
    }
    return made;
  }

  return {
    /** Records the generation's subscription (the delivery workflow's first step); a repeat keeps the first. */
    async saveWebhookSubscription(input: { generationId: string; url: string; events: string[] }) {
      await saveGenerationWebhook(db, input.generationId, {
        url: input.url,
        events: input.events as GenerationEventType[],
      });
    },

    /**
     * The generation's subscribed events after `afterSeq` (one read of the log, no waiting: the
     * workflow waits, on a timer and its nudges), and whether more can come. With `deliverFirst`,
     * it then makes the first attempt of each, in order (deliverFirst), as the account's turns allow.
     */
    async nextWebhookEvents(input: WebhookLook): Promise<WebhookEvents> {
      const started = Date.now();
      const answer = await look(input);
      if (!input.deliverFirst || answer.events.length === 0) return answer;
      return { ...answer, firstAttempts: await deliverFirst(input.generationId, answer.events, started) };
    },

    /**
     * One attempt to deliver event `seq` to the generation's URL, in its account's turn (else
     * `busy`, nothing sent): signed with the account's current secrets over the exact bytes sent,
     * 15 s for the receiver, recorded whatever happens.
     */
    deliverWebhook: attempt,
  };
}
