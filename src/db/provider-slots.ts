import { sql, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import { z } from 'zod';

type Transactional = Pick<DatabasePool | DatabaseTransactionConnection, 'transaction'>;

const takeProviderSlotRow = z.object({ taken: z.boolean() });

/**
 * Takes one of a provider account's in-flight places for a generation, unless `cap` of its
 * generations already hold one; true when it holds one (taking it again is a no-op). Places held
 * by generations that have ended do not count, so a place nobody gave back cannot leak.
 */
export async function takeProviderSlot(
  db: Transactional,
  generationId: string,
  provider: string,
  cap: number,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    // One taker per provider at a time; each statement below reads what the previous taker committed.
    await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(hashtext(${`provider-slots:${provider}`}))`);
    const taken = await tx.maybeOneFirst(sql.type(takeProviderSlotRow)`
      INSERT INTO provider_slots (generation_id, provider)
      SELECT ${generationId}, ${provider}
      WHERE EXISTS (SELECT 1 FROM provider_slots WHERE generation_id = ${generationId})
         OR (SELECT count(*) FROM provider_slots s JOIN generations g ON g.id = s.generation_id
             WHERE s.provider = ${provider} AND g.status = 'queued' AND NOT g.needs_review) < ${cap}
      ON CONFLICT (generation_id) DO UPDATE SET provider = EXCLUDED.provider
      RETURNING true AS taken`);
    return taken === true;
  });
}

/** Gives a generation's in-flight place back (its provider job ended, or was never sent); idempotent. */
export async function releaseProviderSlot(
  db: Pick<DatabasePool, 'query'>,
  generationId: string,
): Promise<void> {
  await db.query(sql.unsafe`DELETE FROM provider_slots WHERE generation_id = ${generationId}`);
}

const providerSlotsInUseRow = z.object({ provider: z.string(), in_flight: z.number() });

/** Places held per provider, by generations still in flight (for operators). */
export async function providerSlotsInUse(db: Pick<DatabasePool, 'any'>): Promise<Map<string, number>> {
  const rows = await db.any(sql.type(providerSlotsInUseRow)`
    SELECT s.provider, count(*)::int AS in_flight FROM provider_slots s JOIN generations g ON g.id = s.generation_id
    WHERE g.status = 'queued' AND NOT g.needs_review GROUP BY s.provider`);
  return new Map(rows.map((row) => [row.provider, row.in_flight]));
}
