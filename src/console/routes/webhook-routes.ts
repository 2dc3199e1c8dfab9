import type { FastifyInstance } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import { generationEventsAfter } from '../../db/generation-events.js';
import { getGeneration } from '../../db/generation-reads.js';
import { redeliverWebhook } from '../../generations/redeliver-webhook.js';
import { webhookDeliveriesOf, type WebhookDeliveriesView } from '../../db/webhook-delivery-reads.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { formField, userOf } from '../request-fields.js';

/** What a generation's page shows of its webhook (views/webhook-deliveries.eta). */
export interface WebhookPageData {
  webhooks: WebhookDeliveriesView;
  /** The logged events its subscription covers: each can be delivered again. */
  webhookEvents: { seq: number; type: string }[];
}

/** The account's generation's subscription, attempts and redeliverable events. */
export async function webhookPageData(
  db: CommonQueryMethods,
  accountId: string,
  generationId: string,
): Promise<WebhookPageData> {
  const webhooks = await webhookDeliveriesOf(db, generationId, accountId);
  if (!webhooks.subscription) return { webhooks, webhookEvents: [] };
  const subscribed = new Set(webhooks.subscription.events);
  const events = await generationEventsAfter(db, generationId, 0);
  return {
    webhooks,
    webhookEvents: events.filter((e) => subscribed.has(e.type)).map(({ seq, type }) => ({ seq, type })),
  };
}

/**
 * Redelivering one event of the owner's generation (issue 30 §3): the form on the generation's
 * page, behind the console's session and CSRF checks like every POST. It costs nothing and changes
 * nothing of the generation; the receiver gets the event again with the same webhook-id.
 */
export function webhookRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.post<{ Params: { id: string } }>('/generations/:id/webhooks/redeliver', async (request, reply) => {
    const { accountId } = userOf(request);
    const row = await getGeneration(deps.db, accountId, request.params.id);
    if (!row) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    const data = await webhookPageData(deps.db, accountId, row.id);
    const text = formField(request.body, 'event') ?? '';
    const seq = /^\d{1,9}$/.test(text) ? Number(text) : null;
    const event = data.webhookEvents.find((e) => e.seq === seq);
    if (!data.webhooks.subscription || !event) {
      const message = !data.webhooks.subscription
        ? 'This generation has no webhook: there is nothing to redeliver.'
        : 'Choose one of the events listed: that event is not one this webhook is sent.';
      return sendPage(request, reply, 'error', { title: 'Not redelivered', message, format }, 400);
    }
    const { db, temporal, taskQueue } = deps.admission;
    const asked = await redeliverWebhook({ db, temporal, taskQueue }, row.id, event.seq);
    // The subscription and the event were read just above; neither is ever deleted apart from the generation.
    if (asked.outcome !== 'queued')
      throw new Error(`redelivery of ${row.id} event ${event.seq}: ${asked.outcome}`);
    return reply.redirect(`/generations/${row.id}?redelivered=${event.seq}`, 303);
  });
}
