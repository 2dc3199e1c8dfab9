import type { CommonQueryMethods } from 'slonik';
import { openBatchesOf } from '../../db/open-batches.js';
import { ApiError } from '../../vocabulary/errors.js';

/** What one account's open batches may hold together (BATCH_OPEN_PER_ACCOUNT, BATCH_QUEUED_LINES_PER_ACCOUNT). */
export interface BatchCaps {
  openPerAccount: number;
  queuedLinesPerAccount: number;
}

/**
 * Refuses a batch of `lines` lines that would take its account past its caps: open batches
 * (`409 open_batch_limit_exceeded`) or the lines they hold (`409 batch_lines_limit_exceeded`).
 * A 409, not a 429: no retry within seconds helps (batches end in hours), and a client's automatic
 * retry would send the whole upload again.
 * Called in the transaction that writes the batch (`batchId`, not counted), under the account's
 * batch lock: two batches created at once are counted one after the other.
 */
export async function checkBatchCaps(
  tx: CommonQueryMethods,
  batch: { accountId: string; batchId: string; lines: number },
  caps: BatchCaps,
): Promise<void> {
  const open = await openBatchesOf(tx, batch.accountId, batch.batchId);
  if (open.batches >= caps.openPerAccount)
    throw new ApiError(
      'open_batch_limit_exceeded',
      `The account has ${open.batches} open batches, the most it may have; one must end (complete, expire or be canceled) before another is created. Nothing was written.`,
    );
  if (open.lines + batch.lines > caps.queuedLinesPerAccount)
    throw new ApiError(
      'batch_lines_limit_exceeded',
      `The account's open batches hold ${open.lines} lines and may hold ${caps.queuedLinesPerAccount}; this batch's ${batch.lines} would pass that. Send it when earlier batches have ended, or in parts. Nothing was written.`,
    );
}
