import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { eventsAfter, type EventsAfterOptions } from './events-after.js';

/**
 * A batch's events (migration 0026): written here with the batch as it then stood, and logged in
 * the account's event log by a trigger, beside its generations' events.
 */
export const batchEventTypes = [
  'batch.created',
  'batch.progress',
  'batch.completed',
  'batch.canceled',
  'batch.expired',
] as const;
export type BatchEventType = (typeof batchEventTypes)[number];

const writtenRow = z.object({ seq: z.number() });

/**
 * Appends an event with `resource` (the Batch object, which must name its `account_id`). A
 * `batch.progress` is written only when the batch's last one is at least a second old, and the
 * end events once each: a retried activity writes no second one. Returns its seq, or null.
 */
export async function recordBatchEvent(
  db: CommonQueryMethods,
  batchId: string,
  type: BatchEventType,
  resource: Record<string, unknown> & { account_id: string },
): Promise<number | null> {
  const unless =
    type === 'batch.progress'
      ? sql.fragment`type = 'batch.progress' AND created_at > now() - interval '1 second'`
      : sql.fragment`type = ${type}`;
  return db.maybeOneFirst(sql.type(writtenRow)`
    WITH locked AS (SELECT id FROM batches WHERE id = ${batchId} FOR UPDATE)
    INSERT INTO batch_events (batch_id, seq, type, resource)
    SELECT locked.id, coalesce((SELECT max(seq) FROM batch_events WHERE batch_id = ${batchId}), 0) + 1,
           ${type}, ${sql.jsonb(resource as never)}
    FROM locked
    WHERE NOT EXISTS (SELECT 1 FROM batch_events WHERE batch_id = ${batchId} AND ${unless})
    RETURNING seq`);
}

/** A batch's event: the Batch object as it was (with the account it belongs to), under its number. */
export interface BatchEventRow {
  seq: number;
  type: BatchEventType;
  created_at: string;
  batch: Record<string, unknown>;
}

export const batchEventRow = z.object({
  seq: z.number(),
  type: z.enum(batchEventTypes),
  created_at: z.string(),
  resource: z.record(z.string(), z.unknown()),
});

export function toBatchEventRow({ resource, ...event }: z.infer<typeof batchEventRow>): BatchEventRow {
  return { ...event, batch: resource };
}

/** The events that end a batch: nothing is logged for it after one. */
export const isBatchEnd = (type: BatchEventType): boolean =>
  type === 'batch.completed' || type === 'batch.canceled' || type === 'batch.expired';

/** The events of batch `batchId` after `afterSeq` (0: all of them), oldest first (eventsAfter). */
export async function batchEventsAfter(
  db: CommonQueryMethods,
  batchId: string,
  afterSeq: number,
  options: EventsAfterOptions = {},
): Promise<BatchEventRow[]> {
  return (await eventsAfter(db, 'batch', batchId, afterSeq, batchEventRow, options)).map(toBatchEventRow);
}

/**
 * A batch's event as clients read it (GET /v1/batches/{id}/events, GET /v1/events, a webhook's
 * body): the Batch as `data`, without the account_id its log row keeps.
 */
export function toBatchEvent(event: BatchEventRow) {
  const { account_id: _account, ...batch } = event.batch;
  return { id: event.seq, type: event.type, created_at: event.created_at, data: batch };
}
