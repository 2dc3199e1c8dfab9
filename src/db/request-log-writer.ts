import pg from 'pg';
import type { Logger } from 'pino';
import { copyRequestLogChunks, toCopyLine, type RequestLogEntry } from './request-log-repository.js';

const CHUNK_BYTES = 1 << 20;

/**
 * Collects request-log entries and writes them in batches (COPY) over one
 * connection of its own, so the request path never waits on the log.
 *
 * Entries are encoded at once into large byte buffers rather than kept as JS
 * objects or strings: thousands of small objects held for a flush interval
 * survive young-generation collections and cost far more in garbage
 * collection than the logging itself. A failed write is retried with the next
 * batch; past `maxBufferedBytes` the oldest chunks are dropped, with a warning.
 */
export class RequestLogWriter {
  private full: Buffer[] = [];
  private current = Buffer.allocUnsafe(CHUNK_BYTES);
  private used = 0;
  private flushing: Promise<void> | null = null;
  private client: pg.Client | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: Logger,
    private readonly options: { flushIntervalMs?: number; maxBufferedBytes?: number } = {},
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? 1000);
    this.timer.unref();
  }

  add(entry: RequestLogEntry): void {
    const line = toCopyLine(entry);
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.used + line.length * 3 > this.current.length) this.seal(Math.max(CHUNK_BYTES, line.length * 3));
    this.used += this.current.write(line, this.used);
  }

  /** Closes the current chunk and starts a new one of at least `size` bytes. */
  private seal(size = CHUNK_BYTES): void {
    if (this.used > 0) this.full.push(this.current.subarray(0, this.used));
    this.current = Buffer.allocUnsafe(size);
    this.used = 0;
    const max = this.options.maxBufferedBytes ?? 256 * CHUNK_BYTES;
    let buffered = this.full.reduce((n, chunk) => n + chunk.length, 0);
    while (buffered > max && this.full.length > 0) {
      buffered -= this.full.shift()!.length;
      this.log.warn('request log buffer full; oldest entries dropped');
    }
  }

  /** Writes everything buffered so far; concurrent calls share one write. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.seal();
    if (this.full.length === 0) return Promise.resolve();
    const batch = this.full;
    this.full = [];
    this.flushing = this.write(batch)
      .catch((error: unknown) => {
        this.log.warn({ err: error }, 'request log write failed; will retry');
        this.full = batch.concat(this.full);
        void this.client?.end().catch(() => undefined);
        this.client = null;
      })
      .finally(() => {
        this.flushing = null;
      });
    return this.flushing;
  }

  private async write(batch: Buffer[]): Promise<void> {
    if (!this.client) {
      const client = new pg.Client({ connectionString: this.databaseUrl });
      client.on('error', () => undefined); // surfaced by the next write
      await client.connect();
      // A lost log batch on a crash is better than a request path that waits for fsync.
      await client.query('SET synchronous_commit = off');
      this.client = client;
    }
    await copyRequestLogChunks(this.client, batch);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    if (this.full.length > 0 || this.used > 0) await this.flush();
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }
}
