import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/** A batch's statuses before it ends: it is open, and counts against its account's caps. */
export const openBatchStatuses = ['validating', 'in_progress', 'canceling'] as const;

const openRow = z.object({ batches: z.number(), lines: z.number() });

/**
 * The account's open batches but `except`, and the lines they hold: what the caps on open batches
 * and their lines (BATCH_OPEN_PER_ACCOUNT, BATCH_QUEUED_LINES_PER_ACCOUNT) are checked against.
 * Under the account's batch lock, held until the transaction ends, so that two batches created at
 * once are counted one after the other.
 */
export async function openBatchesOf(
  tx: CommonQueryMethods,
  accountId: string,
  except: string,
): Promise<{ batches: number; lines: number }> {
  await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(hashtext(${`batches:${accountId}`}))`);
  return tx.one(sql.type(openRow)`
    SELECT count(*)::int AS batches, coalesce(sum(line_count), 0)::int AS lines FROM batches
    WHERE account_id = ${accountId} AND status = ANY(${sql.array([...openBatchStatuses], 'text')})
      AND id <> ${except}`);
}
