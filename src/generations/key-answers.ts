import type { KeyHolder } from '../db/idempotency-keys.js';
import type { AdmitResult } from '../workflows/generation-types.js';
import { admitUpdate } from '../workflows/generation-workflow.js';
import type { AdmitUpdateDeps } from './admit-update.js';
import { askNewestRun } from './newest-run.js';
import type { StartOutcome } from './start-outcome.js';

/*
 * How a request is answered when its Idempotency-Key is already held, before anything new starts:
 * from the key's record in PostgreSQL, or by the running workflow of the generation that holds it.
 */

/**
 * A retry answered from the key's record, as its generation's workflow would answer it: another
 * body is a conflict whatever became of the first request; a refusal that claimed the key keeps its
 * error; a generation that has ended (succeeded or failed) is admitted as it now stands. One still
 * queued is left to its workflow (null): a retry then waits for the handover, as the first request did.
 */
export function answerFromRecord(holder: KeyHolder, fingerprint: string): StartOutcome | null {
  const { row } = holder;
  const generationId = row.id;
  if (holder.fingerprint !== fingerprint) return { outcome: 'conflict', generationId, inputPrefix: null };
  if (row.status === 'rejected' && row.error)
    return { outcome: 'rejected', generationId, error: row.error, inputPrefix: null };
  if (row.status === 'succeeded' || row.status === 'failed')
    return { outcome: 'admitted', generationId, known: row };
  return null;
}

/**
 * The answer of the generation that holds the key in a workflow still running (its record may not
 * be written yet, or it is still queued), asked without starting one; null when none runs, or its
 * generation no longer holds the key. A Temporal that cannot be asked is as good as none: the
 * request is then refused (503) like a new one, which a retry with the same key puts right.
 */
export async function meetRunning(
  deps: Pick<AdmitUpdateDeps, 'temporal' | 'admissionTimeoutMs'>,
  workflowId: string,
  now: () => number,
): Promise<AdmitResult | null> {
  try {
    const answer = await deps.temporal.connection.withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
      askNewestRun(() =>
        deps.temporal.workflow
          .getHandle(workflowId)
          .executeUpdate(admitUpdate, { updateId: `admit-${workflowId}` }),
      ),
    );
    return Date.parse(answer.keyHeldUntil) > now() ? answer : null;
  } catch {
    // No run (WorkflowNotFoundError: none, or it has closed), or Temporal did not answer in time.
    return null;
  }
}
