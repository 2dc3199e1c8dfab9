import { galleryImageUrls } from '../db/generation-results.js';
import { makeThumbnail, thumbnailName } from '../media/thumbnail.js';
import type { ActivityDeps } from './activity-deps.js';

/**
 * The gallery's thumbnails, made after a generation succeeded, on their own task queue
 * (thumbnailQueue): work for the console, not the customer's result, so the generation's critical
 * path never waits on it.
 */
export function createThumbnailActivities(deps: Pick<ActivityDeps, 'db' | 'storage'>) {
  const { db, storage } = deps;

  /**
   * A thumbnail beside each of the generation's gallery images, from the stored image (read back:
   * the persist that stored it has moved on). Rewriting one gives the same file, so a retry is
   * harmless; an image gone meanwhile (content expired) is skipped.
   */
  async function makeThumbnails(generationId: string): Promise<{ made: number }> {
    let made = 0;
    for (const url of await galleryImageUrls(db, generationId)) {
      const key = storage.keyOf(url);
      if (!key?.prefix) continue;
      const image = await storage.read(key.prefix, key.name);
      if (!image) continue;
      await storage.put(key.prefix, thumbnailName(key.name), await makeThumbnail(image));
      made++;
    }
    return { made };
  }

  return { makeThumbnails };
}
