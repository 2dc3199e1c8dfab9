import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const openRow = z.object({ batches: z.number(), lines: z.number() });

/**
 * The account's open batches but `except` (not ended: the statuses of the partial index
 * batches_account_open, written out so that it is used), and the lines they hold: what the caps on
 * open batches and their lines (BATCH_OPEN_PER_ACCOUNT, BATCH_QUEUED_LINES_PER_ACCOUNT) are
 * checked against. Under the account's batch lock, held until the transaction ends, so that two
 * batches created at once are counted one after the other.
 */
export async function openBatchesOf(
  tx: CommonQueryMethods,
  accountId: string,
  except: string,
): Promise<{ batches: number; lines: number }> {
  await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(hashtext(${`batches:${accountId}`}))`);
  return tx.one(sql.type(openRow)`
    SELECT count(*)::int AS batches, coalesce(sum(line_count), 0)::int AS lines FROM batches
    WHERE account_id = ${accountId} AND status IN ('validating', 'in_progress', 'canceling')
      AND id <> ${except}`);
}
