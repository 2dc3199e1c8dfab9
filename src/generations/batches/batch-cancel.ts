import type { CommonQueryMethods } from 'slonik';
import { setBatchStatus, type BatchRow } from '../../db/batches.js';
import { ApiError } from '../../vocabulary/errors.js';
import { startBatchWorkflow, type BatchStartDeps } from './batch-start.js';

/**
 * Cancels a batch (POST /v1/batches/{id}/cancel and the console's form): it is `canceling`, and its
 * workflow ends the lines not started (never charged) and asks running ones to stop. A batch whose
 * workflow may never have started (its create's start failed, and no retry with its key came) gets
 * it started now, so that the cancel is carried out: a running workflow is met, an ended one is
 * not started again. When Temporal cannot be reached the cancel stays recorded and the answer is a
 * 503, to be sent again.
 */
export async function cancelBatch(
  deps: BatchStartDeps & { db: CommonQueryMethods },
  batch: BatchRow,
): Promise<BatchRow> {
  const row = (await setBatchStatus(deps.db, batch.id, 'canceling')) ?? batch;
  if (row.status !== 'canceling' || row.started_at !== null) return row;
  try {
    // One line in flight: a canceling batch's workflow admits none.
    await startBatchWorkflow(deps, row, { linesInFlight: 1 });
  } catch (error) {
    throw new ApiError(
      'service_unavailable',
      'The cancel is recorded but could not be carried out yet; send it again.',
      { cause: error },
    );
  }
  return row;
}
