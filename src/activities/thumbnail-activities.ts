import { Context } from '@temporalio/activity';
import { pendingThumbnails, thumbnailsMade } from '../db/generation-results.js';
import { makeThumbnail, thumbnailName } from '../media/thumbnail.js';
import type {
  ThumbnailActivities,
  ThumbnailSweepOptions,
  ThumbnailSweepReport,
} from '../workflows/contracts/thumbnails.js';
import type { ActivityDeps } from './activity-deps.js';

/**
 * The gallery's thumbnails, made by a sweep (thumbnailsWorkflow) on their own task queue
 * (thumbnailQueue): work for the console, not the customer's result, so no generation waits on it.
 */
export function createThumbnailActivities(deps: Pick<ActivityDeps, 'db' | 'storage'>): ThumbnailActivities {
  const { db, storage } = deps;

  /**
   * A thumbnail beside each pending gallery image, from the stored image, batch by batch; each
   * batch's images are then marked made. Rewriting one gives the same file, so a retried or
   * overlapping sweep is harmless; an image gone meanwhile is marked too (nothing to make).
   */
  async function makePendingThumbnails(options: ThumbnailSweepOptions): Promise<ThumbnailSweepReport> {
    let made = 0;
    for (let batch = 0; batch < options.maxBatches; batch++) {
      const pending = await pendingThumbnails(db, options.batchSize);
      for (const { url } of pending) {
        Context.current().heartbeat({ made });
        const key = storage.keyOf(url);
        const image = key?.prefix ? await storage.read(key.prefix, key.name) : null;
        if (!key?.prefix || !image) continue;
        await storage.put(key.prefix, thumbnailName(key.name), await makeThumbnail(image));
        made++;
      }
      await thumbnailsMade(
        db,
        pending.map((image) => image.id),
      );
      if (pending.length < options.batchSize) return { made, more: false };
    }
    return { made, more: (await pendingThumbnails(db, 1)).length > 0 };
  }

  return { makePendingThumbnails };
}
