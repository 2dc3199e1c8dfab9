import { PermanentError } from '../vocabulary/errors.js';
import {
  measureMedia,
  measureMediaFile,
  UnreadableMediaError,
  type MeasuredMedia,
} from '../media/measure-media.js';
import { extensionOfMediaType, type Storage } from '../storage/storage.js';
import type { Provider, ProviderResult } from './provider.js';

/**
 * Copies one result from its provider into our storage: fetched (a download streams to a
 * temporary file, so a large video is never held in memory), measured from its bytes (what the
 * file is, not what the provider said: a provider's figures may be rounded, or absent), and
 * stored under the extension of what it is, which the result host serves it as. The gallery's
 * thumbnail is made later, from the stored image, by a sweep off the generation's workflow (thumbnailsWorkflow).
 */
export async function copyResult(
  provider: Provider,
  job: { jobId: string; reference: string; index: number; result: ProviderResult },
  storage: Storage,
  prefix: string,
): Promise<{ url: string } & MeasuredMedia> {
  const content = await provider.fetchResult(job.jobId, job.index, job.result);
  try {
    const media = await (
      'bytes' in content ? measureMedia(content.bytes) : measureMediaFile(content.file)
    ).catch((error: unknown) => {
      // Only bytes that are not media are final; a worker that could not measure them (ffmpeg
      // timed out or missing, no memory, a full disk) leaves them to the next attempt.
      if (error instanceof UnreadableMediaError)
        throw new PermanentError(`result ${job.index} of job ${job.reference}: ${messageOf(error)}`);
      throw error;
    });
    const extension = extensionOfMediaType(media.contentType);
    if (!extension)
      throw new PermanentError(
        `result ${job.index} of job ${job.reference} is ${media.contentType}, which is not stored`,
      );
    const name = `output-${job.index}.${extension}`;
    const url =
      'bytes' in content
        ? await storage.put(prefix, name, content.bytes)
        : await storage.putFile(prefix, name, content.file, content.size);
    return { url, ...media };
  } finally {
    if ('dispose' in content) await content.dispose();
  }
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
