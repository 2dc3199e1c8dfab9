import type { CommonQueryMethods } from 'slonik';
import {
  generationEventsAfter,
  type GenerationEventRow,
  type GenerationEventType,
} from '../db/generation-events.js';
import { batchEventsAfter, isBatchEnd } from '../db/batch-events.js';
import { generationWebhookOf, markStoppedByGoneUrl } from '../db/generation-webhooks.js';
import { webhookSubjectKind } from '../db/webhook-subjects.js';
import type { WebhookEvents } from '../workflows/contracts/webhook-delivery.js';

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
 * One read of the log: the subscribed events after `afterSeq`, and whether more can come. The
 * subject is a generation, or a batch (its events end with batch.completed, canceled or expired).
 */
export async function lookForEvents(
  db: CommonQueryMethods,
  input: { generationId: string; afterSeq: number },
): Promise<WebhookEvents> {
  const webhook = await generationWebhookOf(db, input.generationId);
  // Its URL answered 410 since it was made (to this or another subscription's delivery): stopped.
  if (webhook?.urlGoneAt && !webhook.gone) await markStoppedByGoneUrl(db, input.generationId);
  if (!webhook || webhook.gone || webhook.urlGoneAt)
    return { events: [], throughSeq: input.afterSeq, finished: true, onlyExpiryLeft: false };
  if (webhookSubjectKind(input.generationId) === 'batch')
    return lookForBatchEvents(db, input, new Set(webhook.events));
  const all = await generationEventsAfter(db, input.generationId, input.afterSeq, {
    withNewest: true,
  });
  const after = all.filter((event) => event.seq > input.afterSeq);
  const newest = all.at(-1);
  const subscribed = new Set<string>(webhook.events);
  const events = after.filter((event) => subscribed.has(event.type)).map(({ seq, type }) => ({ seq, type }));
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

/** A batch's subscribed events after `afterSeq`: none can follow its end event. */
async function lookForBatchEvents(
  db: CommonQueryMethods,
  input: { generationId: string; afterSeq: number },
  subscribed: ReadonlySet<string>,
): Promise<WebhookEvents> {
  const all = await batchEventsAfter(db, input.generationId, input.afterSeq, { withNewest: true });
  const after = all.filter((event) => event.seq > input.afterSeq);
  const newest = all.at(-1);
  const throughSeq = after.at(-1)?.seq ?? input.afterSeq;
  return {
    events: after.filter((event) => subscribed.has(event.type)).map(({ seq, type }) => ({ seq, type })),
    throughSeq,
    finished: newest !== undefined && throughSeq >= newest.seq && isBatchEnd(newest.type),
    onlyExpiryLeft: false,
  };
}
