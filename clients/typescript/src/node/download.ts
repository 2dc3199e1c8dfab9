import { randomBytes } from 'node:crypto';
import { link, mkdir, open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { GenerationClientError } from '../core/errors.js';
import { anySignal } from '../core/signals.js';
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
  /** Gives up (DownloadError) when no byte arrives for this long, headers included. Default 30 000. */
  idleTimeoutMs?: number;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** A file already at the target is kept and returned as saved (a resumed download), not an error. */
  skipExisting?: boolean;
}

/** A download that did not land: the result host's answer, or the file being there already. */
export class DownloadError extends GenerationClientError {}

const extensionOf = (contentType: string | null) =>
  ({ 'image/png': '.png', 'image/jpeg': '.jpg', 'image/webp': '.webp', 'video/mp4': '.mp4' })[
    (contentType ?? '').split(';')[0]!.trim()
  ] ?? '';

/** How long a download may go without a byte (the answer's headers included) before it gives up. */
export const defaultIdleTimeoutMs = 30_000;

/**
 * Downloads one output to a file, streaming; never overwrites (an existing file is a DownloadError).
 * The bytes go to a temporary `<name>.<random>.part` beside the target, which becomes the target
 * only when complete (a hard link, which fails if the target exists, so two downloads cannot
 * write one path). A download that fails, stalls past `idleTimeoutMs` or is aborted removes its
 * partial file: the target is either whole or absent, and a new download starts clean.
 */
export async function download(file: OutputFile, options: DownloadOptions): Promise<SavedFile> {
  const warn = options.warn ?? ((message: string) => console.warn(message));
  if (options.expiresAt && Date.parse(options.expiresAt) < Date.now())
    warn(`This result expired at ${options.expiresAt}; it may be gone.`);
  const idleMs = options.idleTimeoutMs ?? defaultIdleTimeoutMs;
  if (!(idleMs > 0)) throw new RangeError(`idleTimeoutMs must be a positive number, not ${idleMs}`);
  const named = path.extname(new URL(file.url).pathname) ? targetPath(options.to, file.url, null) : undefined;
  if (options.skipExisting && named && (await exists(named))) return existing(named, file);
  // Re-armed by every chunk: a slow download goes on, a silent one stops.
  const idle = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const rearm = () => {
    clearTimeout(timer);
    timer = setTimeout(
      () =>
        idle.abort(
          new DownloadError(`GET ${file.url}: no data for ${idleMs / 1000} s; the partial file was removed.`),
        ),
      idleMs,
    );
  };
  const signal = anySignal([options.signal, idle.signal]);
  const failure = (error: unknown) => (idle.signal.aborted ? idle.signal.reason : error) as Error;
  let partial: string | undefined;
  try {
    rearm();
    const response = await (options.fetch ?? fetch)(file.url, { signal }).catch((error: unknown) => {
      throw failure(error);
    });
    if (!response.ok || !response.body)
      throw new DownloadError(`GET ${file.url}: ${response.status} ${response.statusText}`);
    const target = targetPath(options.to, file.url, response.headers.get('content-type'));
    if (options.skipExisting && (await exists(target))) {
      await response.body.cancel().catch(() => undefined);
      return await existing(target, file);
    }
    if (await exists(target)) throw new DownloadError(`${target} exists; not overwritten.`);
    await mkdir(path.dirname(target), { recursive: true });
    partial = `${target}.${randomBytes(4).toString('hex')}.part`;
    const handle = await open(partial, 'wx');
    let size = 0;
    try {
      const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>, { signal });
      body.on('data', (chunk: Buffer) => {
        size += chunk.length;
        rearm();
      });
      await pipeline(body, handle.createWriteStream(), { signal });
    } catch (error) {
      throw failure(error);
    } finally {
      await handle.close().catch(() => undefined);
    }
    await link(partial, target).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST')
        throw new DownloadError(`${target} exists; not overwritten.`, { cause: error });
      throw error;
    });
    return { path: target, size, width: file.width, height: file.height, url: file.url };
  } finally {
    clearTimeout(timer);
    if (partial) await rm(partial, { force: true });
  }
}

function targetPath(to: string, url: string, contentType: string | null): string {
  if (!to.endsWith(path.sep) && !to.endsWith('/')) return to;
  const name = path.basename(new URL(url).pathname) || 'output';
  return path.join(to, path.extname(name) ? name : name + extensionOf(contentType));
}

const existing = async (target: string, file: OutputFile): Promise<SavedFile> => ({
  path: target,
  size: (await stat(target)).size,
  width: file.width,
  height: file.height,
  url: file.url,
});

const exists = (file: string) =>
  stat(file).then(
    () => true,
    () => false,
  );

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
