import { sql, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import { z } from 'zod';

type Transactional = Pick<DatabasePool | DatabaseTransactionConnection, 'transaction'>;

/**
 * Who asks for a place: an interactive generation (someone is waiting for it), or a batch's line,
 * counted for its account and its batch.
 */
export type PlaceClaim =
  { lane: 'interactive'; accountId: string } | { lane: 'batch'; accountId: string; batchId: string };

/**
 * How places are shared: batch lines hold at most `batchShare` of a provider's cap, and, unless that
 * share is all of it, always leave one place for interactive generations (see batchPlaces).
 */
export interface PlaceRules {
  cap: number;
  batchShare: number;
}

/** A waiter that has not tried for this long has stopped waiting (moved on, ended, its worker gone). */
const waiterGoneAfterSeconds = 10;

const placeStandingRow = z.object({
  holds: z.boolean(),
  held: z.number(),
  batch_held: z.number(),
  /** The generation's place in the fair order among those waiting (null when it holds a place already). */
  turn: z.number().nullable(),
});

/**
 * Takes one of a provider account's in-flight places for a generation, in the fair order; true
 * when it holds one (taking it again is a no-op). Places held by generations that have ended do
 * not count, so a place nobody gave back cannot leak.
 *
 * A generation that finds no place for it says it is waiting, and tries again later (its submit
 * is retried). The free places go to the waiters in this order: interactive generations first,
 * oldest first; then batch lines, round-robin between accounts (the account holding the fewest
 * places goes next) and, within an account, between its batches the same way. Batch lines together
 * never hold more than their places (batchPlaces: `batchShare` of the cap, never its last place),
 * so a place is always left for an interactive generation. A waiter that stopped trying is passed
 * over after a few seconds.
 */
export async function takeProviderSlot(
  db: Transactional,
  generationId: string,
  provider: string,
  claim: PlaceClaim,
  rules: PlaceRules,
): Promise<boolean> {
  const batchId = claim.lane === 'batch' ? claim.batchId : null;
  return db.transaction(async (tx) => {
    // One taker per provider at a time; each statement below reads what the previous taker committed.
    await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(hashtext(${`provider-slots:${provider}`}))`);
    await tx.query(sql.unsafe`
      INSERT INTO provider_place_waiters (generation_id, provider, lane, account_id, batch_id)
      VALUES (${generationId}, ${provider}, ${claim.lane}, ${claim.accountId}, ${batchId})
      ON CONFLICT (generation_id) DO UPDATE SET provider = EXCLUDED.provider, tried_at = now()`);
    const standing = await tx.one(sql.type(placeStandingRow)`
      WITH held AS (
        SELECT s.generation_id, s.lane, s.account_id, s.batch_id
        FROM provider_slots s JOIN generations g ON g.id = s.generation_id
        WHERE s.provider = ${provider} AND g.status = 'queued' AND NOT g.needs_review
      ), by_account AS (
        SELECT account_id, count(*) AS n FROM held WHERE lane = 'batch' GROUP BY account_id
      ), by_batch AS (
        SELECT batch_id, count(*) AS n FROM held WHERE lane = 'batch' GROUP BY batch_id
      ), waiting AS (
        SELECT w.generation_id, w.lane, w.account_id, w.waiting_since,
               coalesce(b.n, 0) + row_number() OVER (
                 PARTITION BY w.lane, w.batch_id ORDER BY w.waiting_since, w.generation_id) AS batch_turn,
               coalesce(a.n, 0) AS account_held
        FROM provider_place_waiters w
        JOIN generations g ON g.id = w.generation_id AND g.status = 'queued' AND NOT g.needs_review
        LEFT JOIN by_account a ON a.account_id = w.account_id AND w.lane = 'batch'
        LEFT JOIN by_batch b ON b.batch_id = w.batch_id AND w.lane = 'batch'
        WHERE w.provider = ${provider}
          AND w.generation_id NOT IN (SELECT generation_id FROM held)
          AND (w.tried_at > now() - make_interval(secs => ${waiterGoneAfterSeconds})
               OR w.generation_id = ${generationId})
      ), turns AS (
        SELECT generation_id, lane, waiting_since, batch_turn,
               account_held + row_number() OVER (
                 PARTITION BY lane, account_id ORDER BY batch_turn, waiting_since, generation_id) AS account_turn
        FROM waiting
      ), ordered AS (
        SELECT generation_id, row_number() OVER (
          ORDER BY lane = 'batch', CASE WHEN lane = 'batch' THEN account_turn ELSE 0 END,
                   waiting_since, generation_id) AS turn
        FROM turns
      )
      SELECT EXISTS (SELECT 1 FROM provider_slots WHERE generation_id = ${generationId}) AS holds,
             (SELECT count(*) FROM held)::int AS held,
             (SELECT count(*) FROM held WHERE lane = 'batch')::int AS batch_held,
             (SELECT turn FROM ordered WHERE generation_id = ${generationId})::int AS turn`);
    const free = rules.cap - standing.held;
    const mayTake =
      standing.holds ||
      (standing.turn !== null &&
        standing.turn <= free &&
        (claim.lane === 'interactive' || standing.batch_held < batchPlaces(rules)));
    if (!mayTake) return false;
    await tx.query(sql.unsafe`
      INSERT INTO provider_slots (generation_id, provider, lane, account_id, batch_id)
      VALUES (${generationId}, ${provider}, ${claim.lane}, ${claim.accountId}, ${batchId})
      ON CONFLICT (generation_id) DO UPDATE SET provider = EXCLUDED.provider`);
    // The waiter is served; waiters long gone are forgotten on the way.
    await tx.query(sql.unsafe`
      DELETE FROM provider_place_waiters
      WHERE generation_id = ${generationId}
         OR (provider = ${provider} AND tried_at < now() - interval '5 minutes')`);
    return true;
  });
}

/**
 * The places batch lines may hold together: their share of the cap, at least one, and never the
 * last one (an interactive generation always finds a place at once) unless the share is the whole
 * cap. So a provider with one place serves batch lines only when BATCH_PROVIDER_SHARE is 1;
 * otherwise they go to their model's next route, or wait.
 */
export function batchPlaces({ cap, batchShare }: PlaceRules): number {
  if (batchShare >= 1) return cap;
  return Math.min(cap - 1, Math.max(1, Math.floor(cap * batchShare)));
}

/**
 * Gives a generation's in-flight place back (its provider job ended, or was never sent), and its
 * turn in the queue for one (it moved on to another route); idempotent.
 */
export async function releaseProviderSlot(
  db: Pick<DatabasePool, 'query'>,
  generationId: string,
): Promise<void> {
  await db.query(sql.unsafe`
    WITH left_queue AS (DELETE FROM provider_place_waiters WHERE generation_id = ${generationId})
    DELETE FROM provider_slots WHERE generation_id = ${generationId}`);
}

const providerSlotsInUseRow = z.object({ provider: z.string(), in_flight: z.number() });

/** Places held per provider, by generations still in flight (for operators). */
export async function providerSlotsInUse(db: Pick<DatabasePool, 'any'>): Promise<Map<string, number>> {
  const rows = await db.any(sql.type(providerSlotsInUseRow)`
    SELECT s.provider, count(*)::int AS in_flight FROM provider_slots s JOIN generations g ON g.id = s.generation_id
    WHERE g.status = 'queued' AND NOT g.needs_review GROUP BY s.provider`);
  return new Map(rows.map((row) => [row.provider, row.in_flight]));
}
