import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * A generation's route attempts (migration 0019): a route that proved it did not take the job is
 * ended here, and the submit claim moves to the next plan position in the same statement, so the
 * next route's create can only be claimed once this one's end is recorded.
 */

const endRouteRow = z.object({ moved: z.boolean() });

/**
 * Route `position` did not accept the job (`reason`): recorded, the claim freed (and the in-flight
 * place given back) and moved to `position + 1`, in one statement, only while `attempt` holds the
 * claim of that position and no job is recorded. False when it no longer does (taken over: the
 * holder now decides) — then nothing changed.
 */
export async function endRoute(
  db: CommonQueryMethods,
  generationId: string,
  attempt: string,
  ended: { position: number; route: number; provider: string; reason: string },
): Promise<boolean> {
  const moved = await db.maybeOneFirst(sql.type(endRouteRow)`
    WITH moved AS (
      UPDATE generations SET submit_attempted_at = NULL, submit_claim = NULL, submit_sent_at = NULL,
        submit_awaiting_until = NULL, provider = NULL, route_position = ${ended.position + 1}, updated_at = now()
      WHERE id = ${generationId} AND submit_claim = ${attempt} AND provider_job_id IS NULL
        AND route_position = ${ended.position}
      RETURNING id
    ), freed AS (
      DELETE FROM provider_slots WHERE generation_id IN (SELECT id FROM moved)
    ), recorded AS (
      INSERT INTO route_attempts (generation_id, position, route, provider, outcome, reason)
      SELECT id, ${ended.position}, ${ended.route}, ${ended.provider}, 'not_accepted', ${ended.reason} FROM moved
      ON CONFLICT (generation_id, position) DO NOTHING
    )
    SELECT count(*) > 0 AS moved FROM moved`);
  return moved === true;
}

const leaveRouteRow = z.object({ moved: z.boolean(), left_now: z.string().nullable() });

/**
 * The job of plan position `position` ended without ever starting: the route's attempt marked
 * not accepted, the job id and the claim cleared and moved to `position + 1`, the in-flight place
 * given back, in one statement, while the generation still waits on that job. `moved` when moved,
 * now or before (a retry); `leftNow`, the route's provider when this call moved it (counted once).
 */
export async function leaveRoute(
  db: CommonQueryMethods,
  generationId: string,
  ended: { position: number; jobId: string; reason: string },
): Promise<{ moved: boolean; leftNow: string | null }> {
  const row = await db.one(sql.type(leaveRouteRow)`
    WITH moved AS (
      UPDATE generations SET provider_job_id = NULL, provider = NULL, submit_attempted_at = NULL,
        submit_claim = NULL, submit_sent_at = NULL, submit_awaiting_until = NULL,
        route_position = ${ended.position + 1}, updated_at = now()
      WHERE id = ${generationId} AND provider_job_id = ${ended.jobId} AND route_position = ${ended.position}
        AND status = 'queued' AND NOT needs_review AND NOT credits_refunded
      RETURNING id
    ), freed AS (
      DELETE FROM provider_slots WHERE generation_id IN (SELECT id FROM moved)
    ), recorded AS (
      UPDATE route_attempts SET outcome = 'not_accepted', reason = ${ended.reason}
      WHERE generation_id IN (SELECT id FROM moved) AND position = ${ended.position}
      RETURNING provider
    )
    SELECT EXISTS (SELECT 1 FROM moved) OR EXISTS (
      SELECT 1 FROM route_attempts WHERE generation_id = ${generationId} AND position = ${ended.position}
        AND provider_job_id = ${ended.jobId} AND outcome = 'not_accepted') AS moved,
      (SELECT provider FROM recorded) AS left_now`);
  return { moved: row.moved, leftNow: row.left_now };
}

const attemptRow = z.object({
  position: z.number(),
  route: z.number(),
  provider: z.string(),
  provider_job_id: z.string().nullable(),
  outcome: z.enum(['accepted', 'not_accepted']),
  reason: z.string().nullable(),
  recorded_at: z.string(),
});
export type RouteAttempt = z.infer<typeof attemptRow>;

/** A generation's route attempts, in plan order (for support and tests). */
export async function routeAttemptsOf(
  db: CommonQueryMethods,
  generationId: string,
): Promise<readonly RouteAttempt[]> {
  return db.any(sql.type(attemptRow)`
    SELECT position, route, provider, provider_job_id, outcome, reason,
      to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS recorded_at
    FROM route_attempts WHERE generation_id = ${generationId} ORDER BY position`);
}

const healthStateRow = z.object({ down: z.boolean() });

/** Whether the provider's breaker is open now (provider_health: down). */
export async function providerIsDown(db: CommonQueryMethods, provider: string): Promise<boolean> {
  const down = await db.maybeOneFirst(sql.type(healthStateRow)`
    SELECT state = 'down' AS down FROM provider_health WHERE provider = ${provider}`);
  return down === true;
}
