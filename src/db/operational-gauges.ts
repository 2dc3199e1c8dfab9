import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * What operators watch that outlives any one process, read from PostgreSQL when metrics are
 * scraped: the queued generations (through the partial index on queued rows, so the cost follows
 * what is in flight, not the table) and those needing review (their own partial index).
 */

const queuedRow = z.object({
  model: z.string(),
  queued: z.number(),
  too_long: z.number(),
  oldest_age_seconds: z.number(),
});

/** Queued generations by model: how many, how many were created over `tooLongMs` ago, and the oldest's age. */
export async function queuedGenerationsByModel(
  db: CommonQueryMethods,
  tooLongMs: number,
): Promise<readonly z.infer<typeof queuedRow>[]> {
  return db.any(sql.type(queuedRow)`
    SELECT model, count(*)::int AS queued,
      (count(*) FILTER (WHERE created_at < now() - ${sql.interval({ seconds: tooLongMs / 1000 })}))::int AS too_long,
      extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_seconds
    FROM generations WHERE status = 'queued' GROUP BY model`);
}

const generationsNeedingReviewByModelRow = z.object({ model: z.string(), count: z.number() });

/** Generations marked for review (failed with an unknown outcome, or queued past every horizon), by model. */
export async function generationsNeedingReviewByModel(
  db: CommonQueryMethods,
): Promise<readonly { model: string; count: number }[]> {
  return db.any(sql.type(generationsNeedingReviewByModelRow)`
    SELECT model, count(*)::int AS count FROM generations WHERE needs_review GROUP BY model`);
}
