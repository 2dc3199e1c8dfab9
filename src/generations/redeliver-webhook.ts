import type { Client } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';
import { generationWebhookOf, newestEventSeq, webhookEventOf } from '../db/generation-webhooks.js';
import { webhookQueue } from '../workflows/generation-types.js';
import { webhookDeliveryWorkflowId, webhookMessageId } from '../workflows/webhook-delivery-types.js';
import {
  redeliverWebhookSignal,
  type webhookDeliveryWorkflow,
} from '../workflows/webhook-delivery-workflow.js';

export type RedeliveryOutcome =
  /** Asked of the generation's delivery workflow; one attempt follows within seconds, recorded with the others. */
  | { outcome: 'queued'; webhookId: string; eventType: string }
  /** The generation has no webhook subscription. */
  | { outcome: 'no_webhook' }
  /** The generation has no event of that number. */
  | { outcome: 'no_event' };

/**
 * Makes one event (`seq`, its number in the generation's event log) be delivered once more to the
 * generation's subscription, with the same `webhook-id` as before (`msg_<generationId>_<seq>`),
 * a new timestamp and signature (with the account's current secrets). For the console's redeliver
 * button and `npm run admin -- redeliver-webhook`; whose generation it is, is the caller's check.
 *
 *   redeliverWebhook(
 *     deps: { db, temporal: Client, taskQueue: TEMPORAL_TASK_QUEUE (the generations' queue) },
 *     generationId: string,
 *     seq: number,
 *   ): Promise<RedeliveryOutcome>
 *
 * A signal to the generation's delivery workflow (`webhooks-<generationId>`), started again (on
 * the webhooks task queue) if it has ended (signalWithStart: the new run delivers nothing past the events already handled). One
 * attempt, tried even after the receiver answered 410; its outcome is recorded in
 * webhook_delivery_attempts (deliveryAttemptsOf) numbered after the event's last attempt. An event
 * of a type the subscription does not name is delivered too: it was asked for by name.
 */
export async function redeliverWebhook(
  deps: { db: CommonQueryMethods; temporal: Client; taskQueue: string },
  generationId: string,
  seq: number,
): Promise<RedeliveryOutcome> {
  const webhook = await generationWebhookOf(deps.db, generationId);
  if (!webhook) return { outcome: 'no_webhook' };
  if (!Number.isInteger(seq) || seq < 1) return { outcome: 'no_event' };
  // A generation's event, or a batch's (`generationId` is then the batch's id: one delivery machine).
  const event = await webhookEventOf(deps.db, generationId, seq);
  if (!event) return { outcome: 'no_event' };
  const newest = await newestEventSeq(deps.db, generationId);
  await deps.temporal.workflow.signalWithStart<typeof webhookDeliveryWorkflow, [{ seq: number }]>(
    'webhookDeliveryWorkflow',
    {
      workflowId: webhookDeliveryWorkflowId(generationId),
      taskQueue: webhookQueue(deps.taskQueue),
      // Used only when no run is open: every event so far was handled by the run that ended.
      args: [{ generationId, retryDelaysMs: [], afterSeq: newest }],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      signal: redeliverWebhookSignal,
      signalArgs: [{ seq }],
      staticSummary: `webhooks of ${generationId}`,
    },
  );
  return { outcome: 'queued', webhookId: webhookMessageId(generationId, seq), eventType: event.type };
}
