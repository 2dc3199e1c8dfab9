import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

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
