import { setTimeout as sleep } from 'node:timers/promises';
import { imageSize } from 'image-size';
import { imageDimensionsProblem } from '../catalog/image-input.js';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import { routesOf } from '../catalog/routes.js';
import { OutboundFetchError } from '../net/outbound-fetch-error.js';
import { outboundFetch } from '../net/outbound-fetch.js';
import { mediaTypeOfName, type Storage } from '../storage/storage.js';
import type { DownloadPolicy } from './provider-http.js';
import {
  CustomerInputRejection,
  OwnStorageError,
  ProviderRejection,
  type ProviderTarget,
} from './provider.js';

/**
 * Reference images: the customer's inputs an adapter reads as images. Whatever names them (their
 * own URL, or a URL of ours: an inline image the API stored, an earlier result), an image is held
 * to the limits the API holds a data URI to before its bytes are read: an image type, at most
 * 10 MiB, at most 8192 px a side and 50 megapixels. One that fails them, or that cannot be had, is
 * the request's fault (CustomerInputRejection: refunded, never a provider failure).
 */

/** Largest reference image read or sent on: 10 MiB, as the API accepts a data URI. */
export const maxReferenceImageBytes = 10 * 1024 * 1024;
/** The image types a reference image may be. */
const imageTypes = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']);

/** How a customer's host that fails for now (timeout, 5xx, reset) is retried before the request is refused. */
export interface ReferenceRetry {
  /** Fetches in all, the first included. */
  attempts: number;
  /** Wait before the second fetch; doubled before each later one. */
  delayMs: number;
  /** Deadline of each fetch. */
  timeoutMs: number;
}
const defaultRetry: ReferenceRetry = { attempts: 3, delayMs: 1_000, timeoutMs: 30_000 };

/**
 * The input fields of a catalog entry's provider block that hold reference images: those taken
 * from `images` or from image options, and nothing else (not the prompt, not a mapped constant).
 */
export function referenceImageFields(entry: Pick<CatalogEntry, 'options' | 'provider'>): string[] {
  if (!entry.provider) return [];
  const imageSources = new Set([
    'images',
    ...Object.entries(entry.options).flatMap(([name, option]) => (option.type === 'image' ? [name] : [])),
  ]);
  return Object.entries(entry.provider.input).flatMap(([field, mapping]) =>
    'from' in mapping && !mapping.map && [mapping.from].flat().every((source) => imageSources.has(source))
      ? [field]
      : [],
  );
}

/** The request fields (`images`, image options) the entry's reference image fields are taken from. */
export function referenceImageSources(
  entry: Pick<CatalogEntry, 'options' | 'provider' | 'routes'>,
): string[] {
  // A routed model: the sources of every route's block (any of them may serve the request).
  const sources = routesOf(entry).flatMap(({ block }) => {
    const fields = new Set(referenceImageFields({ options: entry.options, provider: block }));
    return Object.entries(block?.input ?? {}).flatMap(([field, mapping]) =>
      fields.has(field) && 'from' in mapping ? [mapping.from].flat() : [],
    );
  });
  return [...new Set(sources)];
}

/**
 * One reference image's bytes and type. One of ours is sized before it is read (a stat, or a
 * HEAD on a bucket) and read from storage, never over HTTP; any other URL is fetched under the
 * outbound rules, a host that fails for now retried a few times.
 */
export async function readReferenceImage(
  url: string,
  storage: Storage,
  policy: DownloadPolicy,
  retry: ReferenceRetry = defaultRetry,
): Promise<{ bytes: Buffer; contentType: string }> {
  const image = storage.keyOf(url)
    ? await readStoredImage(url, storage)
    : await fetchImage(url, policy, retry);
  imageTypeOf(image.bytes);
  return image;
}

/**
 * A customer's image URL fetched under the outbound rules and held to the reference image limits,
 * with the type its bytes are (not the type its host declared). Refusals are CustomerInputRejections.
 */
export async function fetchReferenceImage(
  url: string,
  policy: DownloadPolicy,
  retry: ReferenceRetry = defaultRetry,
): Promise<{ bytes: Buffer; contentType: string }> {
  const { bytes } = await fetchImage(url, policy, retry);
  return { bytes, contentType: imageTypeOf(bytes) };
}

async function readStoredImage(
  url: string,
  storage: Storage,
): Promise<{ bytes: Buffer; contentType: string }> {
  const { prefix, name } = storage.keyOf(url)!;
  const contentType = mediaTypeOfName(name);
  if (!imageTypes.has(contentType))
    throw new CustomerInputRejection(`a reference image of ours is ${contentType}, not an image`);
  // Our store failing says nothing of the input, nor of the provider.
  const size = await ownStorage(() => storage.size(prefix, name));
  if (size === null) throw new CustomerInputRejection('a reference image is no longer stored');
  if (size > maxReferenceImageBytes) throw tooLarge(size);
  const bytes = await ownStorage(() => storage.read(prefix, name));
  if (!bytes) throw new CustomerInputRejection('a reference image is no longer stored');
  // Written between the stat and the read? Never: stored files do not change. Checked anyway.
  if (bytes.length > maxReferenceImageBytes) throw tooLarge(bytes.length);
  return { bytes, contentType };
}

/** A customer's URL: refused at once when it cannot work; a host failing for now gets `retry.attempts`. */
async function fetchImage(
  url: string,
  policy: DownloadPolicy,
  retry: ReferenceRetry,
): Promise<{ bytes: Buffer; contentType: string }> {
  for (let attempt = 1, delay = retry.delayMs; ; attempt++, delay *= 2) {
    try {
      return await outboundFetch(url, {
        maxBytes: maxReferenceImageBytes,
        timeoutMs: retry.timeoutMs,
        accept: [...imageTypes],
        schemes: policy.allowHttp ? ['https:', 'http:'] : ['https:'],
        allowCidrs: policy.allowCidrs,
        ...(policy.extraCa?.length ? { extraCa: policy.extraCa } : {}),
      });
    } catch (error) {
      if (!(error instanceof OutboundFetchError))
        throw new CustomerInputRejection(`a reference image could not be fetched: ${messageOf(error)}`);
      // A name that does not resolve will not start resolving while the customer waits.
      const final = !error.retryable || error.code === 'unknown_host' || attempt >= retry.attempts;
      if (final)
        throw new CustomerInputRejection(
          `a reference image could not be fetched${attempt > 1 ? ` (${attempt} tries)` : ''}: ${error.message}`,
        );
      await sleep(delay);
    }
  }
}

/**
 * A provider's input with each reference image of ours replaced by a data URI of its bytes, read
 * from storage, when it is at most `maxBytes`; a larger one stays our URL, for the provider to
 * fetch. Only the target's reference fields (a URL or a list of URLs) are looked at: a URL in the
 * prompt, or anywhere else, is text. Other URLs stay as given, for the provider to fetch.
 */
export async function inlineStoredImages(
  target: ProviderTarget,
  storage: Storage,
  policy: DownloadPolicy,
  maxBytes = maxReferenceImageBytes,
): Promise<Record<string, unknown>> {
  const inline = async (value: unknown): Promise<unknown> => {
    if (typeof value !== 'string' || !storage.keyOf(value)) return value;
    const image = await readReferenceImage(value, storage, policy);
    return image.bytes.length <= maxBytes ? dataUri(image) : value;
  };
  const input = { ...target.input };
  try {
    for (const field of target.referenceFields ?? []) {
      const value = input[field];
      input[field] = Array.isArray(value) ? await Promise.all(value.map(inline)) : await inline(value);
    }
  } catch (error) {
    if (error instanceof ProviderRejection || error instanceof OwnStorageError) throw error;
    // Anything else of ours (encoding the data URI): nothing was sent, the submit may be tried again.
    throw new OwnStorageError(
      `a stored reference image could not be read; nothing was sent: ${messageOf(error)}`,
    );
  }
  return input;
}

/** A call on our own storage; its failure is ours (OwnStorageError), never the input's or the provider's. */
async function ownStorage<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw new OwnStorageError(`our storage could not be read: ${messageOf(error)}`, { cause: error });
  }
}

/** The types image-size reads that a reference image may be. */
const sniffedTypes: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
};

/**
 * The media type an image's bytes are, once its declared size is within the limits; a
 * CustomerInputRejection when its size cannot be read, is too large to decode, or it is another type.
 */
function imageTypeOf(bytes: Buffer): string {
  let size: { width: number; height: number; type?: string };
  try {
    size = imageSize(bytes);
  } catch {
    throw new CustomerInputRejection(
      'a reference image cannot be used: it is not an image whose size can be read',
    );
  }
  const problem = imageDimensionsProblem(size.width, size.height);
  if (problem) throw new CustomerInputRejection(`a reference image cannot be used: ${problem}`);
  const type = sniffedTypes[size.type ?? ''];
  if (!type)
    throw new CustomerInputRejection(
      `a reference image cannot be used: it is ${size.type ?? 'unknown'}, not png, jpeg, webp or gif`,
    );
  return type;
}

function tooLarge(size: number): CustomerInputRejection {
  return new CustomerInputRejection(
    `a reference image is ${size} bytes; at most ${maxReferenceImageBytes / (1024 * 1024)} MiB is accepted`,
  );
}

/** A data URI of an image's bytes. */
function dataUri(image: { bytes: Buffer; contentType: string }): string {
  return `data:${image.contentType};base64,${image.bytes.toString('base64')}`;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
