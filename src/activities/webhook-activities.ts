import { heartbeat } from '@temporalio/activity';
import type { CommonQueryMethods } from 'slonik';
import type { GenerationEventType } from '../db/generation-events.js';
import { attemptsMadeFor, saveGenerationWebhook } from '../db/generation-webhooks.js';
import type {
  WebhookActivities,
  WebhookAttempt,
  WebhookAttemptOutcome,
  WebhookEvents,
  WebhookLook,
} from '../workflows/contracts/webhook-delivery.js';
import type { ActivityDeps } from './activity-deps.js';
import { webhookAttempts } from './webhook-attempts.js';
import { lookForEvents } from './webhook-look.js';

export { defaultDeliveriesPerAccount } from './webhook-attempts.js';

/**
 * A look starts no first attempt after this long (one more fits, 15 s for the receiver, in its
 * 2-minute deadline): the workflow attempts the rest.
 */
const firstAttemptsForMs = 90_000;

/**
 * The webhook delivery workflow's activities; they run on the webhooks queue (webhookQueue). A look
 * reads the log (webhook-look.ts); an attempt delivers one event in its account's turn
 * (webhook-attempts.ts).
 */
export function createWebhookActivities(deps: ActivityDeps): WebhookActivities {
  const { db } = deps;
  const attempt = webhookAttempts(deps);

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
      const answer = await lookForEvents(db, input);
      if (!input.deliverFirst || answer.events.length === 0) return answer;
      return {
        ...answer,
        firstAttempts: await deliverFirst(db, attempt, input.generationId, answer.events, started),
      };
    },

    /**
     * One attempt to deliver event `seq` to the generation's URL, in its account's turn (else
     * `busy`, nothing sent): signed with the account's current secrets over the exact bytes sent,
     * 15 s for the receiver, recorded whatever happens.
     */
    deliverWebhook: attempt,
  };
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
  db: CommonQueryMethods,
  attempt: (input: WebhookAttempt) => Promise<WebhookAttemptOutcome>,
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
