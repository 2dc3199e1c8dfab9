import type { Client } from '@temporalio/client';
import type { pruningWorkflow } from '../workflows/pruning-workflow.js';
import type { PruningOptions } from '../workflows/contracts/pruning.js';
import { ensureIntervalSchedule, type IntervalScheduleOutcome } from './interval-schedule.js';

/** One pruning schedule per task queue, like the reconciliation sweep (its workers share one database). */
export const pruningScheduleId = (taskQueue: string): string => `generation-pruning.${taskQueue}`;

/**
 * The schedule that runs pruningWorkflow every `intervalMs` on the generation task queue: created
 * by the first worker to start, brought up to date by every later one, and deleted when
 * `intervalMs` is 0 (pruning turned off). Overlapping runs are skipped.
 */
export async function ensurePruningSchedule(
  client: Client,
  settings: { taskQueue: string; intervalMs: number; options: PruningOptions },
): Promise<IntervalScheduleOutcome> {
  return ensureIntervalSchedule<typeof pruningWorkflow>(client, {
    scheduleId: pruningScheduleId(settings.taskQueue),
    workflowType: 'pruningWorkflow',
    taskQueue: settings.taskQueue,
    intervalMs: settings.intervalMs,
    args: [settings.options],
    purpose: 'Deletes key records past their horizon and old request-log, rejected and simulated-job rows',
  });
}
