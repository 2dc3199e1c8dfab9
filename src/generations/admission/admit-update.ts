import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { ApiError } from '../../vocabulary/errors.js';
import type { AdmitResult, GenerationStart } from '../../workflows/generation-types.js';
import { admitUpdate, type generationWorkflow } from '../../workflows/generation-workflow.js';
import {
  AccountId,
  GenerationId,
  GenerationStatus as GenerationStatusKey,
  Model,
  NeedsReview,
} from '../../workflows/search-attributes.js';
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
 * generation its key names. With `meetOnly` (no new generation may start: its provider is down),
 * only a running workflow of the generation the key names is asked, none started, and its answer
 * counts only while that generation holds the key. `failure`: why it did not answer (a 503 when
 * not in time; null when `meetOnly` found no generation holding the key).
 *
 * The first ask uses the workflow id's own update id, so that a retry meets the first request's
 * answer. When that answer is an earlier generation's that no longer holds the key (it passed its
 * horizon, or was rejected without claiming the key: the concurrency limit), the request is asked
 * again with an update id of its own: Temporal answers a repeated update id with the old outcome
 * even after its run closed, and a new update id starts a new run.
 */
export async function askToAdmit(
  deps: AdmitUpdateDeps,
  start: GenerationStart,
  now: () => number,
  meetOnly = false,
): Promise<{ admitted: AdmitResult } | { failure: unknown }> {
  const ownUpdateId = `admit-${start.workflowId}-${start.generationId}`;
  try {
    for (const updateId of [`admit-${start.workflowId}`, ownUpdateId]) {
      const admitted = await admit(deps, start, updateId, !meetOnly);
      const holdsKey =
        admitted.generationId === start.generationId || Date.parse(admitted.keyHeldUntil) > now();
      if (holdsKey || updateId === ownUpdateId) return { admitted };
      if (meetOnly) break;
    }
    return { failure: null };
  } catch (failure) {
    return { failure };
  }
}

/**
 * One ask: an update-with-start (the workflow is started unless it runs already, then asked to
 * admit), or with `startIfNone` false the update alone, which only a running workflow answers.
 */
function admit(
  deps: AdmitUpdateDeps,
  start: GenerationStart,
  updateId: string,
  startIfNone: boolean,
): Promise<AdmitResult> {
  return deps.temporal.connection
    .withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
      // The run the update lands on may continue as new before it answers: the newest one answers.
      askNewestRun(() =>
        startIfNone
          ? deps.temporal.workflow.executeUpdateWithStart(admitUpdate, {
              updateId,
              startWorkflowOperation: new WithStartWorkflowOperation<typeof generationWorkflow>(
                'generationWorkflow',
                {
                  workflowId: start.workflowId,
                  taskQueue: deps.taskQueue,
                  args: [start],
                  workflowIdConflictPolicy: 'USE_EXISTING',
                  // A batch's line runs behind generations created on their own (see batchLinePriority).
                  ...(start.batch ? { priority: batchLinePriority(start.accountId) } : {}),
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
            })
          : deps.temporal.workflow.getHandle(start.workflowId).executeUpdate(admitUpdate, { updateId }),
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

/**
 * The task priority of a batch's line (and of its batch's workflow, on the batches queue): one
 * below the default (3), so that on a contended task
 * queue its workflow and activity tasks (activities inherit their workflow's priority) wait behind
 * generations created on their own, and fair between accounts (the account is the fairness key),
 * so that one account's many lines do not hold back another's. Provider places, which the service
 * allocates itself, follow the same rule (db/provider-slots.ts).
 */
export function batchLinePriority(accountId: string): { priorityKey: number; fairnessKey: string } {
  return { priorityKey: 4, fairnessKey: accountId };
}
