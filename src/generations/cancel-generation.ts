import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';
import { getGeneration, type GenerationRow } from '../db/generation-reads.js';
import { workflowOfGeneration } from '../db/generation-workflows.js';
import { ApiError } from '../vocabulary/errors.js';
import { cancelUpdate } from '../workflows/generation-workflow.js';
import { askNewestRun } from './admission/newest-run.js';

/** A generation a cancel stopped: failed with `canceled`, its debit refunded. */
export const isCanceled = (row: GenerationRow) => row.status === 'failed' && row.error?.code === 'canceled';

/**
 * Cancels a generation under the workflow's rules (see src/workflows/generation-cancel.ts), for the
 * API (`accountId`: the account's own only) and the support command (null). Null when there is no
 * such generation; otherwise the generation as it now stands and whether it is canceled. A second
 * cancel of a canceled one is answered from the row, without Temporal.
 */
export async function cancelGeneration(
  deps: { db: CommonQueryMethods; temporal: Client; timeoutMs: number },
  id: string,
  accountId: string | null,
): Promise<{ canceled: boolean; generation: GenerationRow } | null> {
  const found = await workflowOfGeneration(deps.db, id, accountId);
  if (!found) return null;
  const read = async () => (await getGeneration(deps.db, found.accountId, id))!;
  const before = await read();
  if (before.status !== 'queued' || found.workflowId === null)
    return { canceled: isCanceled(before), generation: before };
  try {
    // A run that continues as new as the cancel reaches it leaves it to the newest run.
    await deps.temporal.connection.withDeadline(Date.now() + deps.timeoutMs, () =>
      askNewestRun(() =>
        deps.temporal.workflow.getHandle(found.workflowId!).executeUpdate(cancelUpdate, { args: [id] }),
      ),
    );
  } catch (error) {
    // A run that has ended decided already: the row says how.
    if (!(error instanceof WorkflowNotFoundError))
      throw new ApiError('service_unavailable', 'The cancel was not decided in time; send it again.', {
        cause: error,
        requestId: id,
      });
  }
  // Read from PostgreSQL, not a cache: the workflow has written its decision before answering.
  const after = await read();
  return { canceled: isCanceled(after), generation: after };
}
