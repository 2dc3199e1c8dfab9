import { ScheduleNotFoundError, type Client } from '@temporalio/client';
import { ensureIntervalSchedule, type IntervalScheduleOutcome } from './interval-schedule.js';
import type { reconciliationWorkflow } from '../workflows/reconciliation-workflow.js';
import type { ReconciliationOptions } from '../workflows/contracts/reconciliation.js';

/**
 * One sweep per task queue: the workers of a task queue share one database, so each deployment
 * sharing a Temporal namespace sweeps its own (and a worker of one never re-points another's).
 */
export const reconciliationScheduleId = (taskQueue: string): string =>
  `generation-reconciliation.${taskQueue}`;

/** The one namespace-wide schedule earlier versions created; replaced by each task queue's own. */
export const LEGACY_RECONCILIATION_SCHEDULE_ID = 'generation-reconciliation';

/**
 * The schedule that runs the reconciliation sweep every `intervalMs` on the generation task queue.
 * Created by the first worker to start, brought up to date by every later one (so a changed
 * interval or grace takes effect on deploy). Overlapping runs are skipped.
 */
export async function ensureReconciliationSchedule(
  client: Client,
  settings: { taskQueue: string; intervalMs: number; options: ReconciliationOptions },
): Promise<IntervalScheduleOutcome> {
  return ensureIntervalSchedule<typeof reconciliationWorkflow>(client, {
    scheduleId: reconciliationScheduleId(settings.taskQueue),
    workflowType: 'reconciliationWorkflow',
    taskQueue: settings.taskQueue,
    intervalMs: settings.intervalMs,
    args: [settings.options],
    purpose: 'Refunds or flags generations left queued without a running workflow',
  });
}

/**
 * Deletes the namespace-wide schedule of earlier versions when it sweeps this task queue, so an
 * upgraded deployment does not sweep twice per interval. One that sweeps another queue belongs to
 * another deployment, not yet upgraded: left alone.
 */
export async function removeLegacyReconciliationSchedule(
  client: Client,
  taskQueue: string,
): Promise<boolean> {
  const legacy = client.schedule.getHandle(LEGACY_RECONCILIATION_SCHEDULE_ID);
  try {
    const { action } = await legacy.describe();
    if (action.type !== 'startWorkflow' || action.taskQueue !== taskQueue) return false;
    await legacy.delete();
    return true;
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) return false;
    throw error;
  }
}
