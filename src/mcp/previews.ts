import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { BaseLogger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { UnreadableMediaError } from '../media/measure-media.js';
import { imagePreview, posterFrame } from '../media/preview.js';
import { besideName } from '../media/thumbnail.js';
import { metricNames } from '../observability/metrics.js';
import type { Storage } from '../storage/storage.js';

/** An `image` block's content: a WebP of at most 1 MB, base64. */
export interface Preview {
  data: string;
  mimeType: 'image/webp';
}

export type PreviewKind = 'image' | 'video';

/** How one decode ended: made; none (over 1 MB even at 256 px); unreadable; aborted (its callers left); error. */
type Outcome = 'made' | 'none' | 'unreadable' | 'aborted' | 'error';

interface Job {
  /** The preview's bytes, or null (none, or not now); never rejects. */
  promise: Promise<Buffer | null>;
  controller: AbortController;
  /** Calls waiting for it: when the last one leaves, the work stops. */
  waiting: number;
  done: boolean;
}

/** The default of MCP_PREVIEW_CONCURRENCY: previews one API process makes at once. */
export const previewConcurrency = 2;

/**
 * The previews of finished results for MCP tool results (an image's, a video's poster frame), one
 * per API process. Each is made once, on its first ask, and kept beside its file in storage as
 * `<name>-preview.webp` (as the gallery's thumbnails are: it goes with the file's content), so that
 * every later call, on any API process, reads that small file and decodes nothing; a file no
 * preview can be made of gets an empty one, so nobody tries again. Making one is bounded work:
 * at most `concurrency` at once in the process (the rest wait their turn); one at a time per file
 * (calls that ask meanwhile wait for it); the file is streamed to a temporary file for libvips or
 * ffmpeg, never held in memory; and once every call waiting for it has gone (its client closed the
 * request), the work stops: the download, the wait for a turn, ffmpeg.
 */
export class Previews {
  private readonly making = new Map<string, Job>();
  private readonly slots: Slots;
  private readonly decodes?: Counter<'kind' | 'outcome'>;

  constructor(
    private readonly storage: Storage,
    private readonly options: { concurrency: number; log: Pick<BaseLogger, 'warn'>; registry?: Registry },
  ) {
    this.slots = new Slots(options.concurrency);
    if (options.registry)
      this.decodes = new Counter({
        name: metricNames.mcpPreviewsMade,
        help: 'Previews of results the API decoded for MCP tool results (each file once), by kind and outcome',
        labelNames: ['kind', 'outcome'],
        registers: [options.registry],
      });
  }

  /** The preview of our stored file at `url`, or null: none can be made, the file is gone, or `signal` aborted. */
  async of(url: string, kind: PreviewKind, signal: AbortSignal): Promise<Preview | null> {
    const key = this.storage.keyOf(url);
    if (!key?.prefix || signal.aborted) return null;
    let job = this.making.get(url);
    if (!job) {
      const name = besideName(key.name, 'preview');
      let kept: Buffer | null;
      try {
        kept = await this.storage.read(key.prefix, name);
      } catch (error) {
        this.options.log.warn({ err: error, url }, 'a kept preview could not be read');
        return null;
      }
      if (kept) return kept.length > 0 ? asPreview(kept) : null;
      // Its client left while it read: nothing to start for it.
      if (signal.aborted) return null;
      job = this.making.get(url) ?? this.start(url, { prefix: key.prefix, name: key.name }, kind);
    }
    return this.waitFor(url, job, signal);
  }

  private start(url: string, key: { prefix: string; name: string }, kind: PreviewKind): Job {
    const controller = new AbortController();
    const job: Job = { promise: Promise.resolve(null), controller, waiting: 0, done: false };
    job.promise = this.make(url, key, kind, controller.signal).finally(() => {
      job.done = true;
      if (this.making.get(url) === job) this.making.delete(url);
    });
    this.making.set(url, job);
    return job;
  }

  private async waitFor(url: string, job: Job, signal: AbortSignal): Promise<Preview | null> {
    job.waiting++;
    try {
      return await new Promise<Preview | null>((resolve) => {
        const leave = () => resolve(null);
        signal.addEventListener('abort', leave, { once: true });
        void job.promise.then((bytes) => {
          signal.removeEventListener('abort', leave);
          resolve(bytes && asPreview(bytes));
        });
      });
    } finally {
      job.waiting--;
      if (job.waiting === 0 && !job.done) {
        // Nobody wants it any more: stop, and let the next ask start afresh.
        if (this.making.get(url) === job) this.making.delete(url);
        job.controller.abort();
      }
    }
  }

  /** Makes and keeps one preview in a turn of its own; null when none is made now. */
  private async make(
    url: string,
    key: { prefix: string; name: string },
    kind: PreviewKind,
    signal: AbortSignal,
  ): Promise<Buffer | null> {
    let release: () => void;
    try {
      release = await this.slots.take(signal);
    } catch {
      return null; // Its callers left while it waited for a turn.
    }
    const name = besideName(key.name, 'preview');
    let dir: string | undefined;
    let outcome: Outcome | undefined;
    try {
      // Made meanwhile (by a call this process no longer waited on, or by another process)?
      const kept = await this.storage.read(key.prefix, name);
      if (kept) return kept.length > 0 ? kept : null;
      dir = await mkdtemp(path.join(os.tmpdir(), 'preview-'));
      const source = path.join(dir, `source${path.extname(key.name)}`);
      if (!(await this.storage.download(key.prefix, key.name, source, signal))) return null;
      outcome = 'error';
      const preview = kind === 'video' ? await posterFrame(source, dir, signal) : await imagePreview(source);
      outcome = preview ? 'made' : 'none';
      // Empty: there is none to make (over 1 MB at every size), and nobody tries again.
      await this.keep(key, name, preview ?? Buffer.alloc(0));
      return preview;
    } catch (error) {
      // Stopped while decoding counts as a decode, aborted; while downloading, as none.
      if (signal.aborted) outcome &&= 'aborted';
      else if (error instanceof UnreadableMediaError) {
        outcome = 'unreadable';
        await this.keep(key, name, Buffer.alloc(0)).catch(() => undefined);
      } else this.options.log.warn({ err: error, url }, 'a preview could not be made');
      return null;
    } finally {
      if (outcome) this.decodes?.inc({ kind, outcome });
      if (dir) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      release();
    }
  }

  /**
   * Keeps a preview beside its file, if the file is still there: its content may have expired
   * meanwhile (its folder deleted), and a preview written now would outlive it.
   */
  private async keep(key: { prefix: string; name: string }, name: string, bytes: Buffer): Promise<void> {
    if ((await this.storage.size(key.prefix, key.name)) !== null)
      await this.storage.put(key.prefix, name, bytes);
  }
}

function asPreview(bytes: Buffer): Preview {
  return { data: bytes.toString('base64'), mimeType: 'image/webp' };
}

/** Turns at some work, `count` at once; a wait for one ends (rejecting) when its signal aborts. */
export class Slots {
  private readonly queue: Array<() => void> = [];

  constructor(private free: number) {}

  /** A turn: resolves with its release (call it once the work is done). */
  take(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const granted = () => {
        signal.removeEventListener('abort', abort);
        resolve(this.releaser());
      };
      const abort = () => {
        this.queue.splice(this.queue.indexOf(granted), 1);
        reject(signal.reason as Error);
      };
      this.queue.push(granted);
      signal.addEventListener('abort', abort, { once: true });
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next) next();
      else this.free++;
    };
  }
}
