import { proxyActivities, setCurrentDetails, workflowInfo } from '@temporalio/workflow';
import type {
  ThumbnailActivities,
  ThumbnailSweepOptions,
  ThumbnailSweepReport,
} from './contracts/thumbnails.js';
import { thumbnailQueue } from './generation-types.js';

/**
 * Started by the `generation-thumbnails.<task queue>` schedule: makes the gallery's thumbnails of
 * the images that succeeded generations recorded as pending, in bounded batches. The thumbnails
 * are not the customer's result, so no generation's workflow waits on them or records them (six
 * history events and a workflow task fewer per generation); the gallery shows each image itself
 * until its thumbnail is made. The activity runs on the thumbnails' own task queue (CPU for
 * libvips, which a deployment may give to workers of their own: WORKER_TASK_QUEUES).
 */
export async function thumbnailsWorkflow(options: ThumbnailSweepOptions): Promise<ThumbnailSweepReport> {
  const { makePendingThumbnails } = proxyActivities<ThumbnailActivities>({
    taskQueue: thumbnailQueue(workflowInfo().taskQueue),
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '1 minute',
    // A queue nobody polls fails the sweep after this long; the next one tries again.
    scheduleToCloseTimeout: '30 minutes',
    retry: { maximumAttempts: 3 },
  });
  const report = await makePendingThumbnails(options);
  setCurrentDetails(`made ${report.made} thumbnails${report.more ? '; more left for the next sweep' : ''}`);
  return report;
}
