import type { CommonQueryMethods } from 'slonik';
import { getGeneration, type GenerationRow } from '../db/generation-reads.js';
import type { InvalidatedCache } from '../caches/invalidated-cache.js';

/** Generation records by id, dropped when PostgreSQL announces a change: polling costs no query. */
export type GenerationCache = InvalidatedCache<string, GenerationRow | null>;

/**
 * The account's generation, from the cache when it holds one (PostgreSQL announces every change
 * that a read shows). Another account's generation is as unknown as one that does not exist.
 */
export async function readOwnGeneration(
  deps: { db: CommonQueryMethods; cache: GenerationCache },
  accountId: string,
  id: string,
): Promise<GenerationRow | null> {
  const row =
    deps.cache.peek(id) ??
    (await deps.cache.get(
      id,
      () => getGeneration(deps.db, accountId, id),
      (r) => r !== null,
    ));
  return row?.account_id === accountId ? row : null;
}
