import type { CommonQueryMethods } from 'slonik';
import {
  attemptsMadeFor,
  generationWebhookOf,
  lastAttemptOf,
  markStoppedByGoneUrl,
  markWebhookGone,
  recordDeliveryAttempt,
  webhookEventOf,
} from '../db/generation-webhooks.js';
import { giveBackDeliveryTurn, takeDeliveryTurn } from '../db/webhook-delivery-turns.js';
import { webhookSecretOf } from '../db/webhook-secrets.js';
import { OutboundFetchError } from '../net/outbound-fetch-error.js';
import { outboundPost } from '../net/outbound-post.js';
import { newWebhookSecret, signWebhook } from '../net/webhook-signing.js';
import {
  webhookDeliveryWorkflowId,
  webhookMessageId,
  webhookNudgeSignalName,
} from '../workflows/webhook-delivery-types.js';
import type { WebhookAttempt, WebhookAttemptOutcome } from '../workflows/contracts/webhook-delivery.js';
import type { ActivityDeps } from './activity-deps.js';

/** The receiver's time for one attempt. */
const receiverTimeoutMs = 15_000;
/** How long an attempt holds its account's turn at most (a worker lost mid-attempt gives it back then). */
const turnLeaseMs = 60_000;
/** WEBHOOK_DELIVERIES_PER_ACCOUNT's default. */
export const defaultDeliveriesPerAccount = 20;

type AttemptDeps = Pick<ActivityDeps, 'db' | 'temporal' | 'webhookDelivery' | 'webhookDeliveriesPerAccount'>;
type Webhook = NonNullable<Awaited<ReturnType<typeof generationWebhookOf>>>;

/**
 * One delivery attempt of an event (deliverWebhook, and a look's first attempts), made in its
 * account's turn: signed with the account's current secrets over the exact bytes sent, 15 s for
 * the receiver, recorded whatever happens.
 */
export function webhookAttempts(
  deps: AttemptDeps,
): (input: WebhookAttempt) => Promise<WebhookAttemptOutcome> {
  const { db } = deps;
  const policy = deps.webhookDelivery ?? { allowCidrs: [] };
  const { takeTurn, giveBackTurn } = deliveryTurns(deps);

  /** One attempt to deliver event `seq` (deliverWebhook). */
  async function attempt(input: WebhookAttempt): Promise<WebhookAttemptOutcome> {
    const webhook = await generationWebhookOf(db, input.generationId);
    if (!webhook) return { outcome: 'gone' };
    // A retry of an event already delivered (an attempt that delivered, then timed out before its
    // answer reached the workflow) sends nothing again. The look's first attempts check this themselves.
    if (
      !input.redelivery &&
      input.attempt > 1 &&
      (await attemptsMadeFor(db, input.generationId, input.seq)).delivered
    )
      return { outcome: 'delivered' };
    // A redelivery was asked for by the owner or support: it is tried even after a 410.
    const sent = input.redelivery || !(webhook.gone || webhook.urlGoneAt);
    const holder = `${input.generationId}/${input.seq}${input.redelivery ? '/redelivery' : ''}`;
    if (sent && !(await takeTurn(webhook.accountId, input.generationId, holder))) return { outcome: 'busy' };
    try {
      return await attemptWith(db, policy, webhook, input);
    } finally {
      // Not given back (the database failed): it lapses with its lease.
      await giveBackTurn(webhook.accountId, holder).catch(() => undefined);
    }
  }
  return attempt;
}

/** The account's delivery turns (WEBHOOK_DELIVERIES_PER_ACCOUNT at once, across workers). */
function deliveryTurns(deps: AttemptDeps) {
  const { db } = deps;
  const turnsPerAccount = deps.webhookDeliveriesPerAccount ?? defaultDeliveriesPerAccount;

  /**
   * Takes a turn of the account's for `holder`'s attempt: true when it may go now; false when as
   * many of its account's attempts run already (WEBHOOK_DELIVERIES_PER_ACCOUNT), or older ones wait.
   */
  const takeTurn = (accountId: string, generationId: string, holder: string) =>
    takeDeliveryTurn(db, { accountId, generationId, holder, cap: turnsPerAccount, leaseMs: turnLeaseMs });

  /**
   * Gives the turn back, and wakes the deliveries of the account's waiters that may take one now.
   * The wake-ups are not waited for: the attempt's answer (a delivery made) must not wait on
   * Temporal past its deadline, which would count it failed and send it again.
   */
  async function giveBackTurn(accountId: string, holder: string): Promise<void> {
    const next = await giveBackDeliveryTurn(db, accountId, holder, turnsPerAccount);
    if (next.length > 0) void wake(next);
  }

  /** Nudges the waiters' deliveries; a waiter whose workflow ended, or a signal Temporal did not take, asks again on its own timer. */
  async function wake(generationIds: readonly string[]): Promise<void> {
    const client = await deps.temporal().catch(() => null);
    if (!client) return;
    await Promise.allSettled(
      [...new Set(generationIds)].map((generationId) =>
        client.workflow.getHandle(webhookDeliveryWorkflowId(generationId)).signal(webhookNudgeSignalName),
      ),
    );
  }
  return { takeTurn, giveBackTurn };
}

/** An attempt (its turn taken) to deliver event `seq` to `webhook`. */
async function attemptWith(
  db: CommonQueryMethods,
  policy: NonNullable<ActivityDeps['webhookDelivery']>,
  webhook: Webhook,
  input: WebhookAttempt,
): Promise<WebhookAttemptOutcome> {
  if (webhook.gone && !input.redelivery) return { outcome: 'gone' };
  // The subject's event: a generation's, or a batch's (the same delivery for both).
  const event = await webhookEventOf(db, input.generationId, input.seq);
  if (!event) throw new Error(`event ${input.seq} not found`);
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
  const body = Buffer.from(event.body, 'utf8');
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
    attempt: input.redelivery ? (await lastAttemptOf(db, input.generationId, input.seq)) + 1 : input.attempt,
    url: webhook.url,
    status,
    latencyMs: performance.now() - started,
    outcome,
    error,
  });
  if (outcome === 'gone') await markWebhookGone(db, input.generationId);
  return { outcome };
}
