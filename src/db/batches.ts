import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * Batches (migration 0026): the batch's own row, its counts, and its list. Its lines are in
 * batch-lines.ts, its events in batch-events.ts.
 */

export const batchStatuses = [
  'validating',
  'in_progress',
  'completed',
  'canceling',
  'canceled',
  'expired',
] as const;
export type BatchStatus = (typeof batchStatuses)[number];

const jsonObject = z.record(z.string(), z.unknown());
const stringMap = z.record(z.string(), z.string());

export const batchRow = z.object({
  id: z.string(),
  account_id: z.string(),
  api_key_id: z.string(),
  workflow_id: z.string(),
  fingerprint: z.string(),
  status: z.enum(batchStatuses),
  completion_window: z.string(),
  line_count: z.number(),
  quoted_credits: z.coerce.number(),
  webhook: jsonObject.nullable(),
  metadata: stringMap.nullable(),
  created_at: z.string(),
  expires_at: z.string(),
  started_at: z.string().nullable(),
  completed_at: z.string().nullable(),
});
export type BatchRow = z.infer<typeof batchRow>;

const batchColumns = sql.fragment`id, account_id, api_key_id, workflow_id, fingerprint, status, completion_window,
  line_count, quoted_credits, webhook, metadata, created_at, expires_at, started_at, completed_at`;

/** A batch as it is written at creation (status `validating`), before its lines and envelope. */
export interface NewBatch {
  id: string;
  accountId: string;
  apiKeyId: string;
  workflowId: string;
  idempotencyKey: string | null;
}

const insertedRow = z.object({ id: z.string() });

/**
 * Writes the batch's row; false when its API key already holds `idempotencyKey` (the caller then
 * answers with that batch, or a conflict). The rest is set by finishInsert, in the same transaction.
 */
export async function insertBatch(db: CommonQueryMethods, batch: NewBatch): Promise<boolean> {
  const id = await db.maybeOneFirst(sql.type(insertedRow)`
    INSERT INTO batches (id, account_id, api_key_id, workflow_id, idempotency_key, fingerprint, completion_window,
                         line_count, quoted_credits, expires_at)
    VALUES (${batch.id}, ${batch.accountId}, ${batch.apiKeyId}, ${batch.workflowId}, ${batch.idempotencyKey}, '',
            '', 1, 0, now())
    ON CONFLICT (api_key_id, idempotency_key) DO NOTHING RETURNING id`);
  return id !== null;
}

/**
 * Sets what was learned reading the body: the fingerprint, how many lines and their quoted total,
 * and the envelope (the JSON form's may come after its lines).
 */
export async function finishInsert(
  db: CommonQueryMethods,
  id: string,
  done: {
    fingerprint: string;
    lineCount: number;
    quotedCredits: number;
    completionWindow: string;
    expiresAt: Date;
    webhook: Record<string, unknown> | null;
    metadata: Record<string, unknown> | null;
  },
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE batches SET fingerprint = ${done.fingerprint}, line_count = ${done.lineCount},
                       quoted_credits = ${done.quotedCredits}, completion_window = ${done.completionWindow},
                       expires_at = ${done.expiresAt.toISOString()},
                       webhook = ${done.webhook ? sql.jsonb(done.webhook as never) : null},
                       metadata = ${done.metadata ? sql.jsonb(done.metadata as never) : null}
    WHERE id = ${id}`);
}

export async function getBatch(
  db: CommonQueryMethods,
  accountId: string | null,
  id: string,
): Promise<BatchRow | null> {
  return db.maybeOne(sql.type(batchRow)`
    SELECT ${batchColumns} FROM batches
    WHERE id = ${id} AND (${accountId}::text IS NULL OR account_id = ${accountId})`);
}

/** The batch its API key's Idempotency-Key names, if any. */
export async function batchOfKey(
  db: CommonQueryMethods,
  apiKeyId: string,
  key: string,
): Promise<BatchRow | null> {
  return db.maybeOne(sql.type(batchRow)`
    SELECT ${batchColumns} FROM batches WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key}`);
}

/** An account's batches, newest first, after the cursor position. */
export async function listBatches(
  db: CommonQueryMethods,
  filter: { accountId: string; limit: number; after: { createdAt: string; id: string } | null },
): Promise<readonly BatchRow[]> {
  const after = filter.after
    ? sql.fragment`AND (created_at, id) < (${filter.after.createdAt}::timestamptz, ${filter.after.id})`
    : sql.fragment``;
  return db.any(sql.type(batchRow)`
    SELECT ${batchColumns} FROM batches WHERE account_id = ${filter.accountId} ${after}
    ORDER BY created_at DESC, id DESC LIMIT ${filter.limit}`);
}

/**
 * Moves a batch on: `in_progress` once its workflow starts (unless a cancel came first),
 * `canceling` on a cancel of a batch not ended, and an end status with its completion time.
 * Returns the row as it now stands (null: no such batch).
 */
export async function setBatchStatus(
  db: CommonQueryMethods,
  id: string,
  to: 'in_progress' | 'canceling' | 'completed' | 'canceled' | 'expired',
): Promise<BatchRow | null> {
  const from =
    to === 'in_progress'
      ? ['validating']
      : to === 'canceling'
        ? ['validating', 'in_progress']
        : ['validating', 'in_progress', 'canceling'];
  await db.query(sql.unsafe`
    UPDATE batches SET status = ${to},
      started_at = CASE WHEN ${to} = 'in_progress' THEN coalesce(started_at, date_trunc('milliseconds', now())) ELSE started_at END,
      cancel_requested_at = CASE WHEN ${to} = 'canceling' THEN date_trunc('milliseconds', now()) ELSE cancel_requested_at END,
      completed_at = CASE WHEN ${to} IN ('completed', 'canceled', 'expired') THEN date_trunc('milliseconds', now()) ELSE completed_at END
    WHERE id = ${id} AND status = ANY(${sql.array(from, 'text')})`);
  return db.maybeOne(sql.type(batchRow)`SELECT ${batchColumns} FROM batches WHERE id = ${id}`);
}

/** How a batch's lines stand: those not started by state, those started by their generation's status. */
export interface BatchCounts {
  total: number;
  pending: number;
  queued: number;
  succeeded: number;
  failed: number;
  rejected: number;
  refused: number;
  canceled: number;
  expired: number;
  /** Credits debited for its lines and not refunded. */
  creditsSpent: number;
}

const countsRow = z.object({
  id: z.string(),
  pending: z.coerce.number(),
  refused: z.coerce.number(),
  canceled: z.coerce.number(),
  expired: z.coerce.number(),
  queued: z.coerce.number(),
  succeeded: z.coerce.number(),
  failed: z.coerce.number(),
  rejected: z.coerce.number(),
  spent: z.coerce.number(),
});

/** The batch's counts (two index scans over its lines and its generations). */
export async function batchCounts(db: CommonQueryMethods, batch: BatchRow): Promise<BatchCounts> {
  return (await batchCountsOf(db, [batch])).get(batch.id)!;
}

/**
 * The counts of each of `batches` (a page of a list), in one statement: one connection and one
 * round trip for the page, however many batches it holds.
 */
export async function batchCountsOf(
  db: CommonQueryMethods,
  batches: readonly BatchRow[],
): Promise<Map<string, BatchCounts>> {
  if (batches.length === 0) return new Map();
  const rows = await db.any(sql.type(countsRow)`
    SELECT b.id, l.pending, l.refused, l.canceled, l.expired, g.queued, g.succeeded, g.failed, g.rejected, g.spent
    FROM unnest(${sql.array(
      batches.map((batch) => batch.id),
      'text',
    )}) AS b(id)
    CROSS JOIN LATERAL (
      SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
             count(*) FILTER (WHERE state = 'refused') AS refused,
             count(*) FILTER (WHERE state = 'canceled') AS canceled,
             count(*) FILTER (WHERE state = 'expired') AS expired
      FROM batch_lines WHERE batch_id = b.id) l
    CROSS JOIN LATERAL (
      SELECT count(*) FILTER (WHERE status = 'queued') AS queued,
             count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
             count(*) FILTER (WHERE status = 'failed') AS failed,
             count(*) FILTER (WHERE status = 'rejected') AS rejected,
             coalesce(sum(credits) FILTER (WHERE NOT credits_refunded), 0) AS spent
      FROM generations WHERE batch_id = b.id) g`);
  const total = new Map(batches.map((batch) => [batch.id, batch.line_count]));
  return new Map(
    rows.map(({ id, spent, ...counts }) => [id, { total: total.get(id)!, ...counts, creditsSpent: spent }]),
  );
}

/** Takes back a batch whose workflow could not be started (its lines go with it; none was admitted). */
export async function deleteBatch(db: CommonQueryMethods, id: string): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM batches WHERE id = ${id} AND status = 'validating'`);
  return result.rowCount > 0;
}
