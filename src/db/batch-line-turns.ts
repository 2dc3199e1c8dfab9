import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik';
import { z } from 'zod';
import type { BatchLineInput } from './batch-lines.js';

/**
 * Whose turn it is among a batch's lines (migration 0035): the lines a slice takes to admit next,
 * bounded across all of the account's batches; a line put off when its admission could not be
 * decided; and the requests an ended batch no longer needs.
 */

/** How long a slice holds the lines it took while it admits them (a slice that died: this long at most). */
const admittingLeaseSeconds = 60;

const takenRow = z.object({
  line: z.number(),
  custom_id: z.string(),
  request: z.record(z.string(), z.unknown()),
});

/**
 * Takes up to `room` of the batch's pending lines that are due (never tried, in input order; then
 * those put off whose time has come), and no more than leaves the account's batch lines in flight
 * (its batch generations still queued, and the lines its slices are admitting) at `accountLimit`.
 * Under the account's lock, so that two slices of one account never both take its last room; the
 * lines taken count as in flight until they are settled (or the lease passes).
 */
export async function takeLines(
  db: Pick<DatabasePool, 'transaction'>,
  take: { batchId: string; accountId: string; room: number; accountLimit: number },
): Promise<BatchLineInput[]> {
  if (take.room <= 0) return [];
  const rows = await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(hashtext(${`batch-lines:${take.accountId}`}))`);
    return tx.any(sql.type(takenRow)`
      WITH flight AS (
        SELECT (SELECT count(*) FROM generations
                WHERE account_id = ${take.accountId} AND status = 'queued' AND batch_id IS NOT NULL)
             + (SELECT count(*) FROM batches b JOIN batch_lines l ON l.batch_id = b.id
                WHERE b.account_id = ${take.accountId}
                  AND b.status IN ('validating', 'in_progress', 'canceling')
                  AND l.state = 'pending' AND l.admitting_until IS NOT NULL
                  AND l.admitting_until > now()) AS n
      ), next AS (
        SELECT line FROM batch_lines
        WHERE batch_id = ${take.batchId} AND state = 'pending'
          AND coalesce(retry_at, '-infinity'::timestamptz) <= now()
        ORDER BY coalesce(retry_at, '-infinity'::timestamptz), line
        LIMIT greatest(0, least(${take.room}::bigint, ${take.accountLimit}::bigint - (SELECT n FROM flight)))
      )
      UPDATE batch_lines l
      SET admitting_until = now() + make_interval(secs => ${admittingLeaseSeconds})
      FROM next WHERE l.batch_id = ${take.batchId} AND l.line = next.line
      RETURNING l.line, l.custom_id, l.request`);
  });
  return rows
    .map((r) => ({ line: r.line, customId: r.custom_id, request: r.request }))
    .sort((a, b) => a.line - b.line);
}

/**
 * A line whose admission could not be decided now (`later`) waits `afterMs` before it is tried
 * again, and is no longer in flight: the slice takes the lines behind it meanwhile.
 */
export async function putOffLine(
  db: CommonQueryMethods,
  batchId: string,
  line: number,
  afterMs: number,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE batch_lines SET admitting_until = NULL, retry_at = now() + make_interval(secs => ${afterMs / 1000})
    WHERE batch_id = ${batchId} AND line = ${line} AND state = 'pending'`);
}

/**
 * An ended batch's line requests, dropped: the results file needs only each line's custom_id,
 * state, error and generation (a line never started keeps its request, though none is left once
 * the batch has ended). Idempotent.
 */
export async function pruneLineRequests(db: CommonQueryMethods, batchId: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE batch_lines SET request = NULL
    WHERE batch_id = ${batchId} AND state <> 'pending' AND request IS NOT NULL`);
}
