import { open, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { GenerationClientError } from '../core/errors.js';
import type { Generation } from '../types.js';

/** One output file of a generation (an image or a video). */
export interface OutputFile {
  url: string;
  width: number;
  height: number;
}

export interface SavedFile {
  /** Where it was written. */
  path: string;
  /** Bytes written. */
  size: number;
  width: number;
  height: number;
  url: string;
}

export interface DownloadOptions {
  /** A file path, or a folder (ending in a separator, or existing) to keep the URL's file name in. */
  to: string;
  /** The generation's expires_at: a download after it warns (the file may already be gone). */
  expiresAt?: string | null;
  /** Where warnings go (default: console.warn). */
  warn?: (message: string) => void;
  signal?: AbortSignal;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
}

/** A download that did not land: the result host's answer, or the file being there already. */
export class DownloadError extends GenerationClientError {}

const extensionOf = (contentType: string | null) =>
  ({ 'image/png': '.png', 'image/jpeg': '.jpg', 'image/webp': '.webp', 'video/mp4': '.mp4' })[
    (contentType ?? '').split(';')[0]!.trim()
  ] ?? '';

/**
 * Downloads one output to a file, streaming; never overwrites (an existing file is a DownloadError,
 * and the file is created exclusively, so two downloads cannot write one path).
 */
export async function download(file: OutputFile, options: DownloadOptions): Promise<SavedFile> {
  const warn = options.warn ?? ((message: string) => console.warn(message));
  if (options.expiresAt && Date.parse(options.expiresAt) < Date.now())
    warn(`This result expired at ${options.expiresAt}; it may be gone.`);
  const response = await (options.fetch ?? fetch)(file.url, {
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (!response.ok || !response.body)
    throw new DownloadError(`GET ${file.url}: ${response.status} ${response.statusText}`);
  let target = options.to;
  if (target.endsWith(path.sep) || target.endsWith('/')) {
    const name = path.basename(new URL(file.url).pathname) || 'output';
    target = path.join(
      target,
      path.extname(name) ? name : name + extensionOf(response.headers.get('content-type')),
    );
  }
  await mkdir(path.dirname(target), { recursive: true });
  const handle = await open(target, 'wx').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'EEXIST')
      throw new DownloadError(`${target} exists; not overwritten.`, { cause: error });
    throw error;
  });
  let size = 0;
  try {
    const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
    body.on('data', (chunk: Buffer) => (size += chunk.length));
    await pipeline(body, handle.createWriteStream());
  } catch (error) {
    await rm(target, { force: true });
    throw error;
  } finally {
    await handle.close().catch(() => undefined);
  }
  return { path: target, size, width: file.width, height: file.height, url: file.url };
}

/** Every output of a generation (images, then videos), into `dir`, as plain paths with sizes. */
export async function downloadAll(
  generation: Generation,
  dir: string,
  options: Omit<DownloadOptions, 'to' | 'expiresAt'> = {},
): Promise<SavedFile[]> {
  if (generation.content_expired)
    throw new DownloadError(`Generation ${generation.id}: its content has expired.`);
  const files: OutputFile[] = [...(generation.output?.images ?? []), ...(generation.output?.videos ?? [])];
  const saved: SavedFile[] = [];
  for (const file of files)
    saved.push(await download(file, { ...options, to: dir + path.sep, expiresAt: generation.expires_at }));
  return saved;
}
