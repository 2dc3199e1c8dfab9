import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * Deletes for the pruning schedule (src/activities/pruning-activities.ts): each deletes at most
 * `limit` rows, found through an index, and says how many it deleted, so a run does bounded work.
 */

const deleted = z.object({ n: z.number() });
const interval = (ms: number) => sql.interval({ seconds: ms / 1000 });

/**
 * Request-log rows older than `retentionMs`, oldest first. The rows come in roughly in time order
 * (ids are assigned as batches are written), so it looks only at the `limit` oldest ids: a run
 * never scans the rows it keeps.
 */
export function pruneRequestLog(db: CommonQueryMethods, retentionMs: number, limit: number): Promise<number> {
  return db.oneFirst(sql.type(deleted)`
    WITH oldest AS (SELECT id, created_at FROM api_request_log ORDER BY id LIMIT ${limit}),
    gone AS (
      DELETE FROM api_request_log l USING oldest
      WHERE l.id = oldest.id AND oldest.created_at < now() - ${interval(retentionMs)}
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM gone`);
}

/**
 * Rejected generations (nothing charged, nothing stored) created more than `retentionMs` ago, and no
 * key holds. A batch's line whose generation goes keeps what its results line shows: it is refused,
 * with the generation's error (its results line `{generation: null, error}` then, as a line refused
 * without a generation).
 */
export function pruneRejectedGenerations(
  db: CommonQueryMethods,
  retentionMs: number,
  limit: number,
): Promise<number> {
  return db.oneFirst(sql.type(deleted)`
    WITH old AS (
      SELECT id FROM generations
      WHERE status = 'rejected' AND created_at < now() - ${interval(retentionMs)}
        -- A key that still names it (its horizon set by the API at the time) keeps it: the retry's
        -- answer is this row's 402, whatever the retention is now.
        AND NOT EXISTS (
          SELECT 1 FROM idempotency_keys k
          WHERE k.api_key_id = generations.api_key_id AND k.idempotency_key = generations.idempotency_key
            AND k.generation_id = generations.id AND k.held_until > now()
        )
      ORDER BY created_at LIMIT ${limit}
    ), gone AS (
      DELETE FROM generations g USING old WHERE g.id = old.id AND g.status = 'rejected'
      RETURNING g.id, g.batch_id, g.custom_id, g.error, g.created_at
    ), lines AS (
      UPDATE batch_lines l SET state = 'refused', generation_id = NULL, request = NULL,
        error = coalesce(gone.error, '{"code": "rejected", "message": "Refused at admission."}'::jsonb),
        ended_at = coalesce(l.ended_at, date_trunc('milliseconds', gone.created_at))
      FROM gone
      WHERE gone.batch_id IS NOT NULL AND l.batch_id = gone.batch_id AND l.custom_id = gone.custom_id
        AND l.generation_id = gone.id
    )
    SELECT count(*)::int AS n FROM gone`);
}

/**
 * Idempotency-Key records past their horizon (the key is new already). A record that a debit
 * renews meanwhile is kept: the condition is checked again on the row it finds.
 */
export function pruneKeyRecords(db: CommonQueryMethods, limit: number): Promise<number> {
  return db.oneFirst(sql.type(deleted)`
    WITH old AS (
      SELECT api_key_id, idempotency_key FROM idempotency_keys
      WHERE held_until < now() ORDER BY held_until LIMIT ${limit}
    ), gone AS (
      DELETE FROM idempotency_keys k USING old
      WHERE k.api_key_id = old.api_key_id AND k.idempotency_key = old.idempotency_key AND k.held_until < now()
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM gone`);
}
