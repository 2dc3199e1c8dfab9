import { heartbeat, sleep } from '@temporalio/activity';
import { generationEventsAfter, type GenerationEventType } from '../db/generation-events.js';
import {
  generationWebhookOf,
  lastAttemptOf,
  markWebhookGone,
  recordDeliveryAttempt,
  saveGenerationWebhook,
  webhookBody,
} from '../db/generation-webhooks.js';
import { webhookSecretOf } from '../db/webhook-secrets.js';
import { OutboundFetchError } from '../net/outbound-fetch-error.js';
import { outboundPost } from '../net/outbound-post.js';
import { newWebhookSecret, signWebhook } from '../webhook-signing.js';
import type {
  WebhookAttempt,
  WebhookAttemptOutcome,
  WebhookEvents,
} from '../workflows/webhook-delivery-types.js';
import { webhookMessageId } from '../workflows/webhook-delivery-types.js';
import type { ActivityDeps } from './activity-deps.js';

/** Events after which nothing more can happen to a generation (content_expired follows a success). */
const final = new Set<string>(['generation.failed', 'generation.rejected', 'generation.content_expired']);
/** How long one look waits for a new event, polling the log meanwhile. */
const lookForMs = 60_000;
const pollEveryMs = 200;
/** The receiver's time for one attempt. */
const receiverTimeoutMs = 15_000;

/** The webhook delivery workflow's activities; they run on the webhooks queue (webhookQueue). */
export function createWebhookActivities(deps: ActivityDeps) {
  const { db } = deps;
  const policy = deps.webhookDelivery ?? { allowCidrs: [] };
  return {
    /** Records the generation's subscription (the delivery workflow's first step); a repeat keeps the first. */
    async saveWebhookSubscription(input: { generationId: string; url: string; events: string[] }) {
      await saveGenerationWebhook(db, input.generationId, {
        url: input.url,
        events: input.events as GenerationEventType[],
      });
    },

    /**
     * The generation's subscribed events after `afterSeq`, waiting (up to a minute, heartbeating)
     * for one when there is none yet. Returns at once when there is nothing more to deliver.
     */
    async nextWebhookEvents(input: { generationId: string; afterSeq: number }): Promise<WebhookEvents> {
      const started = Date.now();
      for (;;) {
        const webhook = await generationWebhookOf(db, input.generationId);
        if (!webhook || webhook.gone)
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
        const ended =
          newest !== undefined && (final.has(newest.type) || newest.type === 'generation.succeeded');
        const finished =
          newest !== undefined &&
          (final.has(newest.type) ||
            (newest.type === 'generation.succeeded' &&
              !subscribed.has('generation.content_expired' satisfies GenerationEventType)));
        // A complete answer (the log read to its end) is given at once when it holds something to do.
        const complete = newest === undefined || throughSeq >= newest.seq;
        if (
          events.length > 0 ||
          (complete && finished) ||
          (complete && ended) ||
          Date.now() - started > lookForMs
        )
          return {
            events,
            throughSeq,
            finished: complete && finished,
            onlyExpiryLeft: complete && !finished && newest?.type === 'generation.succeeded',
            expiresAt: newest?.generation.expires_at ?? null,
          };
        heartbeat();
        await sleep(pollEveryMs);
      }
    },

    /**
     * One attempt to deliver event `seq` to the generation's URL: signed with the account's
     * current secrets over the exact bytes sent, 15 s for the receiver, recorded whatever happens.
     */
    async deliverWebhook(input: WebhookAttempt): Promise<WebhookAttemptOutcome> {
      const webhook = await generationWebhookOf(db, input.generationId);
      // A redelivery was asked for by the owner or support: it is tried even after a 410.
      if (!webhook || (webhook.gone && !input.redelivery)) return { outcome: 'gone' };
      const [event] = await generationEventsAfter(db, input.generationId, input.seq - 1, { limit: 1 });
      if (!event || event.seq !== input.seq) throw new Error(`event ${input.seq} not found`);
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
          { timeoutMs: receiverTimeoutMs, allowCidrs: policy.allowCidrs, extraCa: policy.extraCa },
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
    },
  };
}
