import { mkdir, rm, writeFile, rename } from 'node:fs/promises';
import path from 'node:path';

/**
 * Where results (and inline input images) are kept. Objects live under a
 * folder (`prefix`) named by an unguessable token; the result host serves
 * them at `{baseUrl}/{prefix}/{name}`, so a URL is stable until cleanup
 * removes its prefix.
 */
export interface Storage {
  put(prefix: string, name: string, bytes: Buffer): Promise<string>;
  /** Deletes everything under a prefix; deleting what is gone is not an error. */
  deletePrefix(prefix: string): Promise<void>;
  urlFor(prefix: string, name: string): string;
}

const safeSegment = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9]+)?$/;

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

  async deletePrefix(prefix: string): Promise<void> {
    await rm(this.pathOf(prefix), { recursive: true, force: true });
  }

  urlFor(prefix: string, name: string): string {
    return `${this.baseUrl}/${prefix}/${name}`;
  }

  private pathOf(prefix: string, name?: string): string {
    for (const segment of name === undefined ? [prefix] : [prefix, name]) {
      if (!safeSegment.test(segment)) throw new Error(`unsafe storage path segment ${segment}`);
    }
    return name === undefined ? path.join(this.root, prefix) : path.join(this.root, prefix, name);
  }
}
