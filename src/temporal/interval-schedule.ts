import type { Workflow } from '@temporalio/common';
import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
} from '@temporalio/client';

/** What ensureIntervalSchedule did: `removed` and `off` (there was none) for an interval of 0. */
export type IntervalScheduleOutcome = 'created' | 'updated' | 'removed' | 'off';

/**
 * A schedule that starts workflow `W` (named `workflowType`, as every workflow is named from
 * outside it: its name, typed `typeof` it) every `intervalMs` on `taskQueue` (its run named after the
 * schedule), skipping a run while the last is still going. Created by the first worker to start and
 * brought up to date by every later one, so a changed interval or argument takes effect on deploy;
 * an interval of 0 (or less) turns it off: the schedule is deleted.
 */
export async function ensureIntervalSchedule<W extends Workflow>(
  client: Client,
  schedule: {
    scheduleId: string;
    /** The workflow's name, its export from src/workflows/index.ts. */
    workflowType: string;
    taskQueue: string;
    intervalMs: number;
    args: Parameters<W>;
    purpose: string;
  },
): Promise<IntervalScheduleOutcome> {
  const { scheduleId } = schedule;
  if (schedule.intervalMs <= 0) return deleteSchedule(client, scheduleId);
  const spec = { intervals: [{ every: schedule.intervalMs }] };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: schedule.workflowType,
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

async function deleteSchedule(client: Client, scheduleId: string): Promise<'removed' | 'off'> {
  try {
    await client.schedule.getHandle(scheduleId).delete();
    return 'removed';
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) return 'off';
    throw error;
  }
}
