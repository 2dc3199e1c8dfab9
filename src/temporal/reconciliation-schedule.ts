import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { reconciliationWorkflow, type ReconciliationOptions } from '../workflows/reconciliation-workflow.js';

export const RECONCILIATION_SCHEDULE_ID = 'generation-reconciliation';

/**
 * The schedule that runs the reconciliation sweep every `intervalMs` on the generation task queue.
 * Created by the first worker to start, brought up to date by every later one (so a changed
 * interval or grace takes effect on deploy). Overlapping runs are skipped.
 */
export async function ensureReconciliationSchedule(
  client: Client,
  settings: { taskQueue: string; intervalMs: number; options: ReconciliationOptions },
): Promise<'created' | 'updated'> {
  const spec = { intervals: [{ every: settings.intervalMs }] };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: reconciliationWorkflow,
    workflowId: RECONCILIATION_SCHEDULE_ID,
    taskQueue: settings.taskQueue,
    args: [settings.options] as [ReconciliationOptions],
  };
  try {
    await client.schedule.create({
      scheduleId: RECONCILIATION_SCHEDULE_ID,
      spec,
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      memo: { purpose: 'Refunds or flags generations left queued without a running workflow' },
    });
    return 'created';
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
  }
  await client.schedule
    .getHandle(RECONCILIATION_SCHEDULE_ID)
    .update((previous) => ({ ...previous, spec, action }));
  return 'updated';
}
