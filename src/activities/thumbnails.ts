import type { StoredOutput } from '../db/generation-results.js';
import { makeThumbnail, thumbnailName } from '../media/thumbnail.js';
import type { Storage } from '../storage/storage.js';

/**
 * The gallery's thumbnails, made once as a result is persisted and stored beside each image in the
 * generation's folder, so that content expiry (which deletes the folder) removes them with it.
 * Rewriting one on a retried persist gives the same file: the step stays idempotent.
 */
export async function storeThumbnails(storage: Storage, outputs: readonly StoredOutput[]): Promise<void> {
  for (const output of outputs) {
    if (!output.contentType.startsWith('image/')) continue;
    const key = storage.keyOf(output.url);
    if (!key?.prefix) continue;
    const image = await storage.read(key.prefix, key.name);
    if (!image) continue;
    await storage.put(key.prefix, thumbnailName(key.name), await makeThumbnail(image));
  }
}
