import { createHash } from 'node:crypto';
import { parseImageInput } from '../../catalog/image-input.js';
import { ApiError } from '../../vocabulary/errors.js';
import { randomBase62 } from '../../vocabulary/ids.js';
import type { Storage } from '../../storage/storage.js';

/**
 * An image a caller has already received into a file (the console's uploads, streamed to disk):
 * stored from the file like a data URI's bytes, never read into memory whole. Only code builds one;
 * no JSON body can.
 */
export class StagedImage {
  constructor(
    readonly file: string,
    readonly size: number,
    readonly mediaType: `image/${string}`,
  ) {}
}

/**
 * Stores inline (data URI) images, and staged ones, before the workflow starts, so workflow
 * payloads carry URLs, never image bytes. The folder is derived from the
 * workflow id and fingerprint when there is an Idempotency-Key, so a retry
 * rewrites the same files instead of leaving copies; otherwise it is random. A failure is the 503
 * that the same request sent again puts right.
 */
export function storeInlineImages(
  storage: Storage,
  input: Record<string, unknown>,
  folderSeed: string | null,
): Promise<{ input: Record<string, unknown>; prefix: string | null }> {
  return storeAll(storage, input, folderSeed).catch((error: unknown) => {
    // Nothing has started and nothing is charged: the same request may simply be sent again.
    throw new ApiError(
      'service_unavailable',
      'Inline images could not be stored. Retry with the same Idempotency-Key and body.',
      { cause: error },
    );
  });
}

async function storeAll(
  storage: Storage,
  input: Record<string, unknown>,
  folderSeed: string | null,
): Promise<{ input: Record<string, unknown>; prefix: string | null }> {
  const prefix = `i${folderSeed ? createHash('sha256').update(folderSeed).digest('hex').slice(0, 32) : randomBase62(32)}`;
  let stored = 0;
  const extensionOf = (mediaType: string) =>
    mediaType === 'image/jpeg' ? 'jpg' : mediaType.slice('image/'.length);
  const store = async (value: unknown, name: string): Promise<unknown> => {
    if (value instanceof StagedImage) {
      stored++;
      return storage.putFile(prefix, `${name}.${extensionOf(value.mediaType)}`, value.file, value.size);
    }
    if (typeof value !== 'string' || !value.startsWith('data:')) return value;
    const parsed = parseImageInput(value, true);
    if (!parsed.ok || parsed.image.kind !== 'data') return value; // validated already
    stored++;
    return storage.put(prefix, `${name}.${extensionOf(parsed.image.mediaType)}`, parsed.image.bytes);
  };
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(input)) {
    out[field] = Array.isArray(value)
      ? await Promise.all(value.map((v, i) => store(v, `${field}-${i}`)))
      : await store(value, field);
  }
  return { input: out, prefix: stored > 0 ? prefix : null };
}
