import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { ApiError } from '../errors.js';
import type { AdmitResult, GenerationStart } from '../workflows/generation-types.js';
import { admitUpdate, type generationWorkflow } from '../workflows/generation-workflow.js';
import {
  AccountId,
  GenerationId,
  GenerationStatus as GenerationStatusKey,
  Model,
  NeedsReview,
} from '../workflows/search-attributes.js';
import { askNewestRun } from './newest-run.js';

/** What asking the generation's workflow to admit needs. */
export interface AdmitUpdateDeps {
  temporal: Client;
  taskQueue: string;
  /** How long POST waits for admission and handover before answering 503 (the key stays claimed; a retry gets the outcome). */
  admissionTimeoutMs: number;
}

/**
 * Asks the generation's workflow to admit the request in one update-with-start, which answers once
 * admission is decided (and an accepted job handed over), or meets the running workflow of the
 * generation its key names. `failure`: why it did not answer (a 503 when not in time).
 */
export async function askToAdmit(
  deps: AdmitUpdateDeps,
  start: GenerationStart,
  now: () => number,
): Promise<{ admitted: AdmitResult } | { failure: unknown }> {
  try {
    return { admitted: await admitAnew(deps, start, now) };
  } catch (failure) {
    return { failure };
  }
}

/**
 * Admits the request, asking again when the answer is an earlier generation's that no longer holds
 * the key: it passed its horizon, or was rejected without claiming the key (the concurrency limit).
 * Temporal answers a repeated update id with that old outcome even after its run closed, so the
 * second ask uses an update id of this request's own, which starts a new run.
 */
async function admitAnew(
  deps: AdmitUpdateDeps,
  start: GenerationStart,
  now: () => number,
): Promise<AdmitResult> {
  const admitted = await admit(deps, start, `admit-${start.workflowId}`);
  if (admitted.generationId === start.generationId || Date.parse(admitted.keyHeldUntil) > now())
    return admitted;
  return admit(deps, start, `admit-${start.workflowId}-${start.generationId}`);
}

/** One update-with-start: the workflow is started unless it runs already, then asked to admit. */
function admit(deps: AdmitUpdateDeps, start: GenerationStart, updateId: string): Promise<AdmitResult> {
  return deps.temporal.connection
    .withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
      // The run the update lands on may continue as new before it answers: the newest one answers.
      askNewestRun(() =>
        deps.temporal.workflow.executeUpdateWithStart(admitUpdate, {
          updateId,
          startWorkflowOperation: new WithStartWorkflowOperation<typeof generationWorkflow>(
            'generationWorkflow',
            {
              workflowId: start.workflowId,
              taskQueue: deps.taskQueue,
              args: [start],
              workflowIdConflictPolicy: 'USE_EXISTING',
              staticSummary: `${start.model} for ${start.accountId}: ${String(start.input.prompt).slice(0, 80)}`,
              typedSearchAttributes: [
                { key: GenerationStatusKey, value: 'queued' },
                { key: AccountId, value: start.accountId },
                { key: Model, value: start.model },
                { key: NeedsReview, value: false },
                { key: GenerationId, value: start.generationId },
              ],
            },
          ),
        }),
      ),
    )
    .catch((error: unknown) => {
      throw new ApiError(
        'service_unavailable',
        'Admission did not complete in time. Retry with the same Idempotency-Key and body.',
        { requestId: start.idempotencyKey ? undefined : start.generationId, cause: error },
      );
    });
}
