import { NotFound } from '../db/accounts-repository.js';
import { generationEventsAfter } from '../db/generation-events.js';
import { getGenerationForSupport } from '../db/support-queries.js';
import { webhookDeliveriesOf, type WebhookDeliveriesView } from '../db/webhook-delivery-reads.js';
import { redeliverWebhook } from '../generations/redeliver-webhook.js';
import { CommandRefused, positiveInt, str, type Command } from './command.js';

/**
 * Support's webhook command: deliver one event of a generation again (issue 30 §3), with the same
 * webhook-id, when a customer's receiver lost it. It costs nothing and changes nothing of the
 * generation; the attempt is recorded with the others (`generation --id` lists them).
 */
export const webhookCommands: Record<string, Command> = {
  'redeliver-webhook': {
    summary:
      "Deliver one event of a generation's webhook again, with the same webhook-id (default: the newest event it is sent); one attempt, recorded with the others.",
    usage: '--id GENERATION_ID [--event SEQ]',
    options: { id: { type: 'string', required: true }, event: { type: 'string' } },
    async run({ db, temporal, taskQueue }, v) {
      const id = str(v.id);
      if (!(await getGenerationForSupport(db, id))) throw new NotFound(`no generation ${id}`);
      const { subscription } = await webhookDeliveriesOf(db, id);
      if (!subscription)
        throw new CommandRefused('no_webhook', `${id} was created without a webhook: nothing to redeliver.`);
      const events = await generationEventsAfter(db, id, 0);
      const subscribed = events.filter((e) => subscription.events.includes(e.type));
      const seq = v.event === undefined ? subscribed.at(-1)?.seq : positiveInt(v.event, 'event');
      if (seq === undefined)
        throw new CommandRefused('no_event', `${id} has no event its webhook is sent yet; give --event SEQ.`);
      const asked = await redeliverWebhook(
        { db, temporal: await temporal(), taskQueue: taskQueue ?? 'generations' },
        id,
        seq,
      );
      if (asked.outcome === 'no_event')
        throw new CommandRefused(
          'no_event',
          `${id} has no event ${seq}; its events: ${events.map((e) => `${e.seq} ${e.type}`).join(', ')}.`,
        );
      if (asked.outcome === 'no_webhook')
        throw new CommandRefused('no_webhook', `${id} was created without a webhook: nothing to redeliver.`);
      return {
        json: { generation: id, event: seq, ...asked },
        text: [
          `Redelivering event ${seq} (${asked.eventType}) of ${id} to ${subscription.url} as ${asked.webhookId}; ` +
            `\`generation --id ${id}\` shows the attempt.`,
        ],
      };
    },
  },
};

/** The lines `generation --id` shows of a generation's webhook: its subscription, then each attempt. */
export function describeDeliveries({ subscription, attempts }: WebhookDeliveriesView): string[] {
  if (!subscription) return ['  webhook: (none)'];
  return [
    `  webhook: ${subscription.url} for ${subscription.events.join(', ')}${subscription.gone_at ? ` (410 Gone at ${subscription.gone_at}: stopped)` : ''}`,
    ...(attempts.length === 0 ? ['    no delivery attempted yet'] : []),
    ...attempts.map((a) =>
      [
        `    ${a.attempted_at}`,
        `event ${a.event_seq} ${a.event_type}`,
        `attempt ${a.attempt}`,
        `${a.outcome}${a.status === null ? '' : ` ${a.status}`}`,
        `${a.latency_ms} ms`,
        a.error ?? '',
      ]
        .filter(Boolean)
        .join('  '),
    ),
  ];
}
