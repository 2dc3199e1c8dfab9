import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { batchEventsAfter, toBatchEvent, type BatchEventType } from './batch-events.js';
import {
  generationEventsAfter,
  type GenerationEventRow,
  type GenerationEventType,
} from './generation-events.js';
import { toGenerationEvent } from './generation-view.js';
import { webhookSubjectKind, webhookSubjectTables } from './webhook-subjects.js';

/**
 * Webhook subscriptions and delivery attempts (migrations 0018, 0029). A subscription is written
 * once its request is admitted; a retry of that request (same Idempotency-Key, same body, so the
 * same webhook) writes nothing new. Each function here takes a subject: a generation's id, or a
 * batch's (webhook-subjects.ts), and reads and writes that subject's rows.
 */
export interface GenerationWebhook {
  url: string;
  events: (GenerationEventType | BatchEventType)[];
}

/** Records the subject's subscription; a second call for the same subject keeps the first. */
export async function saveGenerationWebhook(
  db: CommonQueryMethods,
  subjectId: string,
  webhook: GenerationWebhook,
): Promise<void> {
  const { subscriptions, key } = webhookSubjectTables(subjectId);
  await db.query(sql.unsafe`
    INSERT INTO ${subscriptions} (${key}, url, events)
    VALUES (${subjectId}, ${webhook.url}, ${sql.array(webhook.events, 'text')})
    ON CONFLICT (${key}) DO NOTHING`);
}

const subscription = z.object({
  url: z.string(),
  events: z.array(z.string()),
  gone: z.boolean(),
  url_gone_at: z.string().nullable(),
  account_id: z.string(),
});

/**
 * The generation's subscription and its account; null when it has none. `gone`: its own delivery
 * got 410 (or it was stopped by its URL's). `urlGoneAt`: when its URL answered 410 to a delivery of
 * any subscription of the account, if that was at or after this one was made (migration 0022): it
 * stops this one too. A subscription made after the 410 starts afresh (null).
 */
export async function generationWebhookOf(
  db: CommonQueryMethods,
  subjectId: string,
): Promise<(GenerationWebhook & { gone: boolean; urlGoneAt: string | null; accountId: string }) | null> {
  const { subscriptions, key, owners } = webhookSubjectTables(subjectId);
  const found = await db.maybeOne(sql.type(subscription)`
    SELECT w.url, w.events, w.gone_at IS NOT NULL AS gone, g.account_id,
      (SELECT u.gone_at FROM webhook_gone_urls u
        WHERE u.account_id = g.account_id AND u.url = w.url AND u.gone_at >= w.created_at) AS url_gone_at
    FROM ${subscriptions} w JOIN ${owners} g ON g.id = w.${key}
    WHERE w.${key} = ${subjectId}`);
  if (!found) return null;
  return {
    url: found.url,
    events: found.events as GenerationWebhook['events'],
    gone: found.gone,
    urlGoneAt: found.url_gone_at,
    accountId: found.account_id,
  };
}

/**
 * The receiver answered 410 Gone: nothing more is sent to it for this generation, nor for any
 * subscription of the account to that URL made until now (one statement: both or neither).
 */
export async function markWebhookGone(db: CommonQueryMethods, subjectId: string): Promise<void> {
  const { subscriptions, key, owners } = webhookSubjectTables(subjectId);
  await db.query(sql.unsafe`
    WITH marked AS (
      UPDATE ${subscriptions} w SET gone_at = coalesce(w.gone_at, now())
      FROM ${owners} g WHERE w.${key} = ${subjectId} AND g.id = w.${key}
      RETURNING g.account_id, w.url)
    INSERT INTO webhook_gone_urls (account_id, url, gone_at)
    SELECT account_id, url, now() FROM marked
    ON CONFLICT (account_id, url) DO UPDATE
      SET gone_at = greatest(webhook_gone_urls.gone_at, excluded.gone_at)`);
}

/**
 * The subscription's URL answered 410 to another generation's delivery: this one stops too, marked
 * gone as of that answer, the URL's record left as it is.
 */
export async function markStoppedByGoneUrl(db: CommonQueryMethods, subjectId: string): Promise<void> {
  const { subscriptions, key, owners } = webhookSubjectTables(subjectId);
  await db.query(sql.unsafe`
    UPDATE ${subscriptions} w SET gone_at = coalesce(w.gone_at, u.gone_at)
    FROM ${owners} g, webhook_gone_urls u
    WHERE w.${key} = ${subjectId} AND g.id = w.${key}
      AND u.account_id = g.account_id AND u.url = w.url`);
}

export interface DeliveryAttempt {
  /** A generation's id, or a batch's. */
  generationId: string;
  eventSeq: number;
  eventType: string;
  webhookId: string;
  attempt: number;
  url: string;
  status: number | null;
  latencyMs: number;
  outcome: 'delivered' | 'failed' | 'gone';
  error: string | null;
}

export async function recordDeliveryAttempt(db: CommonQueryMethods, a: DeliveryAttempt): Promise<void> {
  const { key } = webhookSubjectTables(a.generationId);
  await db.query(sql.unsafe`
    INSERT INTO webhook_delivery_attempts
      (${key}, event_seq, event_type, webhook_id, attempt, url, status, latency_ms, outcome, error)
    VALUES (${a.generationId}, ${a.eventSeq}, ${a.eventType}, ${a.webhookId}, ${a.attempt}, ${a.url},
      ${a.status}, ${Math.round(a.latencyMs)}, ${a.outcome}, ${a.error})`);
}

const lastAttemptRow = z.object({ last: z.number() });

/** The number of the last attempt made to deliver event `seq` (0: none yet). */
export async function lastAttemptOf(db: CommonQueryMethods, subjectId: string, seq: number): Promise<number> {
  const { key } = webhookSubjectTables(subjectId);
  return db.oneFirst(sql.type(lastAttemptRow)`
    SELECT coalesce(max(attempt), 0)::int AS last FROM webhook_delivery_attempts
    WHERE ${key} = ${subjectId} AND event_seq = ${seq}`);
}

const attemptsMadeRow = z.object({ last: z.number(), delivered: z.boolean() });

/**
 * What has been tried for event `seq` so far: the number of its last attempt (0: none) and whether
 * one delivered it. A look that delivers first attempts reads it first, so that a look run again
 * (its worker was lost) neither sends a delivered event again nor restarts an event's retries.
 */
export async function attemptsMadeFor(
  db: CommonQueryMethods,
  subjectId: string,
  seq: number,
): Promise<{ last: number; delivered: boolean }> {
  const { key } = webhookSubjectTables(subjectId);
  return db.one(sql.type(attemptsMadeRow)`
    SELECT coalesce(max(attempt), 0)::int AS last, coalesce(bool_or(outcome = 'delivered'), false) AS delivered
    FROM webhook_delivery_attempts WHERE ${key} = ${subjectId} AND event_seq = ${seq}`);
}

/**
 * The body a receiver is sent: the event exactly as GET /v1/generations/{id}/events shows it (both
 * are toGenerationEvent; a test holds the two equal). Content past its retention shows as null.
 */
export function webhookBody(event: GenerationEventRow): string {
  return JSON.stringify(toGenerationEvent(event));
}

/**
 * Event `seq` of a subject (a generation's or a batch's log) as its delivery sends it: its type,
 * and the body (a batch's event as GET /v1/batches/{id}/events shows it). Null: no such event.
 */
export async function webhookEventOf(
  db: CommonQueryMethods,
  subjectId: string,
  seq: number,
): Promise<{ seq: number; type: string; body: string } | null> {
  if (webhookSubjectKind(subjectId) === 'batch') {
    const [event] = await batchEventsAfter(db, subjectId, seq - 1, { limit: 1 });
    return event?.seq === seq ? { seq, type: event.type, body: JSON.stringify(toBatchEvent(event)) } : null;
  }
  const [event] = await generationEventsAfter(db, subjectId, seq - 1, { limit: 1 });
  return event?.seq === seq ? { seq, type: event.type, body: webhookBody(event) } : null;
}

const newestRow = z.object({ newest: z.number() });

/** The number of the subject's newest event (0: none): where a redelivery's fresh run starts. */
export async function newestEventSeq(db: CommonQueryMethods, subjectId: string): Promise<number> {
  const events =
    webhookSubjectKind(subjectId) === 'batch'
      ? sql.fragment`batch_events WHERE batch_id = ${subjectId}`
      : sql.fragment`generation_events WHERE generation_id = ${subjectId}`;
  return db.oneFirst(sql.type(newestRow)`SELECT coalesce(max(seq), 0)::int AS newest FROM ${events}`);
}
