import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';

/**
 * A schedule that starts `workflowType` every `intervalMs` on `taskQueue` (its run named after the
 * schedule), skipping a run while the last is still going. Created by the first worker to start and
 * brought up to date by every later one, so a changed interval or argument takes effect on deploy.
 */
export async function ensureIntervalSchedule(
  client: Client,
  schedule: {
    scheduleId: string;
    /** The workflow function; the schedule names it by its name, as the SDK does. */
    workflowType: (...args: never[]) => Promise<unknown>;
    taskQueue: string;
    intervalMs: number;
    args: unknown[];
    purpose: string;
  },
): Promise<'created' | 'updated'> {
  const { scheduleId } = schedule;
  const spec = { intervals: [{ every: schedule.intervalMs }] };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: schedule.workflowType.name,
    workflowId: scheduleId,
    taskQueue: schedule.taskQueue,
    args: schedule.args,
  };
  try {
    await client.schedule.create({
      scheduleId,
      spec,
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      memo: { purpose: schedule.purpose },
    });
    return 'created';
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
  }
  await client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, spec, action }));
  return 'updated';
}
