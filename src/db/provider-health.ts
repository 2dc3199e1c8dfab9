import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * Whether each provider is up, shared by every process (table provider_health, migration 0009).
 * Workers record their calls' outcomes; API processes read which providers are down.
 */

const healthRow = z.object({
  provider: z.string(),
  state: z.enum(['up', 'down']),
  consecutive_failures: z.number(),
  last_error: z.string().nullable(),
  last_failure_at: z.string().nullable(),
  down_since: z.string().nullable(),
  probe_at: z.string().nullable(),
});
type ProviderHealthRow = z.infer<typeof healthRow>;
const healthColumns = sql.fragment`provider, state, consecutive_failures, last_error,
  to_char(last_failure_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_failure_at,
  to_char(down_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS down_since,
  to_char(probe_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS probe_at`;

const recordProviderFailureRow = healthRow.extend({ went_down: z.boolean() });

/**
 * Counts one more failure in a row; the provider goes down at `downAfter` of them, with its first
 * probe `probeAfterMs` later. Returns the row as it now is, and whether this call took it down.
 */
export async function recordProviderFailure(
  db: CommonQueryMethods,
  provider: string,
  error: string,
  policy: { downAfter: number; probeAfterMs: number },
): Promise<{ row: ProviderHealthRow; wentDown: boolean }> {
  const probeIn = sql.fragment`make_interval(secs => ${policy.probeAfterMs / 1000})`;
  const result = await db.one(sql.type(recordProviderFailureRow)`
    INSERT INTO provider_health AS h (provider, consecutive_failures, last_error, last_failure_at, state, down_since, probe_at)
    VALUES (${provider}, 1, ${error}, now(),
      CASE WHEN 1 >= ${policy.downAfter} THEN 'down' ELSE 'up' END,
      CASE WHEN 1 >= ${policy.downAfter} THEN now() END,
      CASE WHEN 1 >= ${policy.downAfter} THEN now() + ${probeIn} END)
    ON CONFLICT (provider) DO UPDATE SET
      consecutive_failures = h.consecutive_failures + 1,
      last_error = EXCLUDED.last_error,
      last_failure_at = now(),
      updated_at = now(),
      state = CASE WHEN h.state = 'down' OR h.consecutive_failures + 1 >= ${policy.downAfter} THEN 'down' ELSE 'up' END,
      down_since = CASE WHEN h.state = 'down' THEN h.down_since
                        WHEN h.consecutive_failures + 1 >= ${policy.downAfter} THEN now() END,
      probe_at = CASE WHEN h.state = 'down' THEN h.probe_at
                      WHEN h.consecutive_failures + 1 >= ${policy.downAfter} THEN now() + ${probeIn} END
    RETURNING ${healthColumns}, (state = 'down' AND down_since = now()) AS went_down`);
  const { went_down: wentDown, ...row } = result;
  return { row, wentDown };
}

const recordProviderSuccessRow = z.object({ was_down: z.boolean() });

/** A call succeeded: the provider is up and its failure count starts again. True when it was down. */
export async function recordProviderSuccess(db: CommonQueryMethods, provider: string): Promise<boolean> {
  const wasDown = await db.maybeOneFirst(sql.type(recordProviderSuccessRow)`
    UPDATE provider_health h SET state = 'up', consecutive_failures = 0, down_since = NULL, probe_at = NULL,
      updated_at = now()
    FROM (SELECT provider, state FROM provider_health WHERE provider = ${provider} FOR UPDATE) before
    WHERE h.provider = before.provider AND (h.consecutive_failures > 0 OR h.state = 'down')
    RETURNING before.state = 'down' AS was_down`);
  return wasDown === true;
}

/** The providers that are down, with when their next probe is due. */
export async function providersDown(db: CommonQueryMethods): Promise<readonly ProviderHealthRow[]> {
  return db.any(sql.type(healthRow)`SELECT ${healthColumns} FROM provider_health WHERE state = 'down'`);
}

/** Every provider that has been seen failing, up or down (for operators). */
export async function providerHealthReport(db: CommonQueryMethods): Promise<readonly ProviderHealthRow[]> {
  return db.any(sql.type(healthRow)`SELECT ${healthColumns} FROM provider_health ORDER BY provider`);
}

const claimProbeRow = z.object({ provider: z.string() });

/**
 * Claims the due probe of a down provider for this process (moving the next one `probeAfterMs`
 * on, so that processes do not probe together); false when it is not down or not due.
 */
export async function claimProbe(
  db: CommonQueryMethods,
  provider: string,
  probeAfterMs: number,
): Promise<boolean> {
  const claimed = await db.maybeOneFirst(sql.type(claimProbeRow)`
    UPDATE provider_health SET probe_at = now() + make_interval(secs => ${probeAfterMs / 1000}), updated_at = now()
    WHERE provider = ${provider} AND state = 'down' AND probe_at <= now()
    RETURNING provider`);
  return claimed !== null;
}
