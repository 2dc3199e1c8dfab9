import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, mkdir, readFile, rm, stat, writeFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

/**
 * Where results (and inline input images) are kept. Objects live under a
 * folder (`prefix`) named by an unguessable token; the result host serves
 * them at `{baseUrl}/{prefix}/{name}`, so a URL is stable until cleanup
 * removes its prefix.
 */
export interface Storage {
  put(prefix: string, name: string, bytes: Buffer): Promise<string>;
  /** Stores a file's content (streamed, never read into memory whole); `size` is the file's. */
  putFile(prefix: string, name: string, file: string, size: number): Promise<string>;
  /** An object's size in bytes without reading it, or null when there is no such object. */
  size(prefix: string, name: string): Promise<number | null>;
  /** An object's bytes, or null when there is no such object (never written, deleted, or not a valid key). */
  read(prefix: string, name: string): Promise<Buffer | null>;
  /**
   * Copies an object into a local file, streamed (never held in memory whole), for a program that
   * reads files (ffmpeg, libvips). False when there is no such object. Stops, rejecting, when
   * `signal` aborts.
   */
  download(prefix: string, name: string, file: string, signal?: AbortSignal): Promise<boolean>;
  /**
   * Deletes everything under a prefix; deleting what is gone is not an error. Throws when it cannot
   * tell that everything is gone, so that the caller retries rather than records the content as deleted.
   */
  deletePrefix(prefix: string): Promise<void>;
  urlFor(prefix: string, name: string): string;
  /**
   * The key a URL on our result host stands for, or null when the URL is not
   * ours. Our own files (inline images the API stored, earlier results) are
   * read with `read`, never fetched over HTTP: the outbound fetcher's address
   * rules need no exception for the result host.
   */
  keyOf(url: string): { prefix: string; name: string } | null;
}

const safeSegment = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9]+)?$/;

/** Whether a prefix or a name can be part of a key: letters, digits, `-`, `_` and one extension. */
export function isSafeSegment(segment: string): boolean {
  return safeSegment.test(segment);
}

/**
 * The key a URL under `baseUrl` stands for, or null when the URL is not under it. Every store
 * publishes `{baseUrl}/{prefix}/{name}`, whichever serves it (our result host, a CDN, a bucket's
 * public endpoint).
 */
export function keyOfResultUrl(baseUrl: string, url: string): { prefix: string; name: string } | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  const base = new URL(baseUrl);
  const basePath = base.pathname.replace(/\/$/, '');
  if (parsed.origin !== base.origin || !parsed.pathname.startsWith(`${basePath}/`)) return null;
  // The result host serves by path alone: queries and fragments change nothing.
  const segments = parsed.pathname.slice(basePath.length + 1).split('/');
  const decoded = segments.map((segment) => {
    try {
      return decodeURIComponent(segment);
    } catch {
      return segment;
    }
  });
  // Ours, whatever the path: a path that names no object reads as missing.
  return decoded.length === 2 ? { prefix: decoded[0]!, name: decoded[1]! } : { prefix: '', name: '' };
}

const mediaTypes: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  mp4: 'video/mp4',
  webm: 'video/webm',
};

/** The extension a file of this media type is stored under; undefined for a type we never store. */
export function extensionOfMediaType(mediaType: string): string | undefined {
  const extension = Object.entries(mediaTypes).find(([, type]) => type === mediaType)?.[0];
  return extension === 'jpeg' ? 'jpg' : extension;
}

/** The media type a stored object is served with, from its name's extension (all we ever store). */
export function mediaTypeOfName(name: string): string {
  const dot = name.lastIndexOf('.');
  return (dot >= 0 && mediaTypes[name.slice(dot + 1).toLowerCase()]) || 'application/octet-stream';
}

/** Files on a local disk (or a mounted volume) under one folder. */
export class LocalStorage implements Storage {
  constructor(
    private readonly root: string,
    private readonly baseUrl: string,
  ) {}

  async put(prefix: string, name: string, bytes: Buffer): Promise<string> {
    const file = this.pathOf(prefix, name);
    await mkdir(path.dirname(file), { recursive: true });
    // Write then rename: a reader never sees half a file, and a retried put just replaces it.
    const staging = `${file}.${process.pid}.tmp`;
    await writeFile(staging, bytes);
    await rename(staging, file);
    return this.urlFor(prefix, name);
  }

  async putFile(prefix: string, name: string, source: string): Promise<string> {
    const file = this.pathOf(prefix, name);
    await mkdir(path.dirname(file), { recursive: true });
    const staging = `${file}.${process.pid}.tmp`;
    await copyFile(source, staging);
    await rename(staging, file);
    return this.urlFor(prefix, name);
  }

  async size(prefix: string, name: string): Promise<number | null> {
    if (!safeSegment.test(prefix) || !safeSegment.test(name)) return null;
    try {
      const found = await stat(this.pathOf(prefix, name));
      return found.isFile() ? found.size : null;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return null;
      throw error;
    }
  }

  async read(prefix: string, name: string): Promise<Buffer | null> {
    if (!safeSegment.test(prefix) || !safeSegment.test(name)) return null;
    try {
      return await readFile(this.pathOf(prefix, name));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return null;
      throw error;
    }
  }

  async download(prefix: string, name: string, file: string, signal?: AbortSignal): Promise<boolean> {
    if (!safeSegment.test(prefix) || !safeSegment.test(name)) return false;
    try {
      await pipeline(createReadStream(this.pathOf(prefix, name)), createWriteStream(file), { signal });
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EISDIR' || code === 'ENOTDIR') return false;
      throw error;
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    await rm(this.pathOf(prefix), { recursive: true, force: true });
  }

  urlFor(prefix: string, name: string): string {
    return `${this.baseUrl}/${prefix}/${name}`;
  }

  keyOf(url: string): { prefix: string; name: string } | null {
    return keyOfResultUrl(this.baseUrl, url);
  }

  private pathOf(prefix: string, name?: string): string {
    for (const segment of name === undefined ? [prefix] : [prefix, name]) {
      if (!safeSegment.test(segment)) throw new Error(`unsafe storage path segment ${segment}`);
    }
    return name === undefined ? path.join(this.root, prefix) : path.join(this.root, prefix, name);
  }
}
