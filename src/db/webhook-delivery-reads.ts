import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * What people read of a generation's webhook deliveries (the console's generation page, support's
 * `generation` command): its subscription and every attempt made, with its time. Written by the
 * delivery activities (generation-webhooks.ts); read here, scoped to an account where a customer reads.
 */

const subscriptionRow = z.object({
  url: z.string(),
  events: z.array(z.string()),
  gone_at: z.string().nullable(),
});

const attemptRow = z.object({
  event_seq: z.number(),
  event_type: z.string(),
  webhook_id: z.string(),
  attempt: z.number(),
  url: z.string(),
  status: z.number().nullable(),
  latency_ms: z.number(),
  outcome: z.enum(['delivered', 'failed', 'gone']),
  error: z.string().nullable(),
  attempted_at: z.string(),
});

export type WebhookSubscriptionView = z.output<typeof subscriptionRow>;
export type DeliveryAttemptView = z.output<typeof attemptRow>;

export interface WebhookDeliveriesView {
  /** Null: the generation was created without a webhook. */
  subscription: WebhookSubscriptionView | null;
  /** Every attempt, oldest first (a redelivery's attempts follow the first delivery's). */
  attempts: DeliveryAttemptView[];
}

/**
 * Generation `generationId`'s subscription and delivery attempts; with `accountId`, only when the
 * generation is that account's (another account's reads as having none).
 */
export async function webhookDeliveriesOf(
  db: CommonQueryMethods,
  generationId: string,
  accountId: string | null = null,
): Promise<WebhookDeliveriesView> {
  const owned = accountId === null ? sql.fragment`TRUE` : sql.fragment`g.account_id = ${accountId}`;
  const subscription = await db.maybeOne(sql.type(subscriptionRow)`
    SELECT w.url, w.events, w.gone_at
    FROM generation_webhooks w JOIN generations g ON g.id = w.generation_id
    WHERE w.generation_id = ${generationId} AND ${owned}`);
  if (!subscription) return { subscription: null, attempts: [] };
  return { subscription, attempts: await deliveryAttemptsOf(db, generationId) };
}

/** A generation's delivery attempts, in the order they were made (unscoped: the caller checked). */
export async function deliveryAttemptsOf(
  db: CommonQueryMethods,
  generationId: string,
): Promise<DeliveryAttemptView[]> {
  const attempts = await db.any(sql.type(attemptRow)`
    SELECT event_seq, event_type, webhook_id, attempt, url, status, latency_ms, outcome, error, attempted_at
    FROM webhook_delivery_attempts WHERE generation_id = ${generationId} ORDER BY id`);
  return [...attempts];
}
