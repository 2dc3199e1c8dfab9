import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const routeDurationRow = z.object({
  model: z.string(),
  provider: z.string(),
  p50_ms: z.number(),
  samples: z.number(),
});
export type RouteDuration = z.infer<typeof routeDurationRow>;

/**
 * The median duration of each provider's recent successes for these models (the `fastest`
 * routing policy): from the create sent to the serving route (`submit_sent_at`, set again by each
 * route's create) to the result stored (`completed_at`), over the generations that succeeded in
 * the last `windowMinutes`. Our own queue wait is left out: it is the same whichever route serves.
 */
export async function recentRouteDurations(
  db: CommonQueryMethods,
  models: readonly string[],
  windowMinutes: number,
): Promise<readonly RouteDuration[]> {
  if (models.length === 0) return [];
  return db.any(routeDurationsQuery(models, windowMinutes));
}

/**
 * The query itself, exported so a test can show its plan: it reads the partial index
 * generations_succeeded_model_completed (model, then completed_at, successes only), not the table.
 */
export function routeDurationsQuery(models: readonly string[], windowMinutes: number) {
  return sql.type(routeDurationRow)`
    SELECT model, provider,
      (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - submit_sent_at)))::float8 * 1000 AS p50_ms,
      count(*)::int AS samples
    FROM generations
    WHERE status = 'succeeded' AND provider IS NOT NULL AND submit_sent_at IS NOT NULL
      AND completed_at > now() - make_interval(mins => ${windowMinutes})
      AND model = ANY(${sql.array(models, 'text')})
    GROUP BY model, provider`;
}
