import type { Client } from '@temporalio/client';
import type { thumbnailsWorkflow } from '../workflows/thumbnails-workflow.js';
import type { ThumbnailSweepOptions } from '../workflows/contracts/thumbnails.js';
import { ensureIntervalSchedule, type IntervalScheduleOutcome } from './interval-schedule.js';

/** One thumbnails schedule per task queue, like the pruning (its workers share one database). */
export const thumbnailsScheduleId = (taskQueue: string): string => `generation-thumbnails.${taskQueue}`;

/**
 * The schedule that runs thumbnailsWorkflow every `intervalMs` on the generation task queue (its
 * activity on the thumbnails' queue): created by the first worker to start, brought up to date by
 * every later one, deleted when `intervalMs` is 0. Overlapping runs are skipped.
 */
export async function ensureThumbnailsSchedule(
  client: Client,
  settings: { taskQueue: string; intervalMs: number; options: ThumbnailSweepOptions },
): Promise<IntervalScheduleOutcome> {
  return ensureIntervalSchedule<typeof thumbnailsWorkflow>(client, {
    scheduleId: thumbnailsScheduleId(settings.taskQueue),
    workflowType: 'thumbnailsWorkflow',
    taskQueue: settings.taskQueue,
    intervalMs: settings.intervalMs,
    args: [settings.options],
    purpose: "Makes the gallery's pending thumbnails (images of succeeded generations)",
  });
}
