import {
  ApplicationFailure,
  isGrpcServiceError,
  ServiceError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';

/**
 * How many times an update is sent to a generation's workflow id when the run it reached ended
 * before answering; all within the caller's one deadline (Connection.withDeadline around the asks).
 */
export const newestRunAsks = 3;

/**
 * Failures the server writes itself (source "Server") when the run an update reached ended without
 * answering it: `UnprocessedUpdate` (the run's last task neither accepted nor rejected it: it
 * completed or continued as new in the task the update came with; some server builds append to
 * the name, hence the prefix) and `AcceptedUpdateCompletedWorkflow` (accepted, then the run
 * ended before its handler returned).
 */
const endedRunFailures = ['UnprocessedUpdate', 'AcceptedUpdateCompletedWorkflow'];

/**
 * Whether an update's error means only that the run it reached is gone, so that the newest run of
 * the workflow id (a generation's active life continues as new into its retention run, and a
 * resolved review back into an active life) is to be asked: a server-written failure above;
 * "workflow is closing" (RESOURCE_EXHAUSTED, BUSY_WORKFLOW), which the server and the client
 * retry themselves until their attempts run out; or a run not found (older servers answer an
 * update caught by a continue-as-new "update aborted by closing workflow"; a workflow id whose
 * last run has ended answers so again, and the caller handles that as before).
 */
export function reachedEndedRun(error: unknown): boolean {
  if (error instanceof WorkflowNotFoundError) return true;
  if (error instanceof WorkflowUpdateFailedError) {
    const { cause } = error;
    return (
      cause instanceof ApplicationFailure &&
      endedRunFailures.some((type) => (cause.type ?? '').startsWith(type))
    );
  }
  const grpc = error instanceof ServiceError ? error.cause : error;
  return isGrpcServiceError(grpc) && /workflow is closing/i.test(grpc.details);
}

/**
 * Sends an update (`ask`, addressed to the workflow id, not to a run) until a run answers it: again
 * when the run it reached ended first (see reachedEndedRun), at most `newestRunAsks` times. Every
 * update the generation's runs answer is safe to send again: admit and cancel answer the same
 * decision whichever run is asked, and a run that ended without answering did not act on it (the
 * generation's runs wait for their handlers before they end: allHandlersFinished).
 */
export async function askNewestRun<T>(ask: () => Promise<T>): Promise<T> {
  for (let asked = 1; ; asked++) {
    try {
      return await ask();
    } catch (error) {
      // A continue-as-new makes the next run in the same step as it ends the last: a second
      // "not found" means the workflow id has no run (the common case, asked once more only).
      const again = error instanceof WorkflowNotFoundError ? asked === 1 : asked < newestRunAsks;
      if (!again || !reachedEndedRun(error)) throw error;
    }
  }
}
