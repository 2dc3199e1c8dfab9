import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import { insertRequestLogEntries, type RequestLogEntry } from '../db/request-log-repository.js';

/**
 * Collects request-log entries in memory and writes them in batches, so the
 * request path never waits on the log. A failed write is retried with the
 * next batch; past `maxBuffered` the oldest entries are dropped, with a warning.
 */
export class RequestLogWriter {
  private buffer: RequestLogEntry[] = [];
  private flushing: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly log: Logger,
    private readonly options: { flushIntervalMs?: number; batchSize?: number; maxBuffered?: number } = {},
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? 250);
    this.timer.unref();
  }

  add(entry: RequestLogEntry): void {
    this.buffer.push(entry);
    const max = this.options.maxBuffered ?? 100_000;
    if (this.buffer.length > max) {
      const dropped = this.buffer.length - max;
      this.buffer.splice(0, dropped);
      this.log.warn({ dropped }, 'request log buffer full; oldest entries dropped');
    }
    if (this.buffer.length >= (this.options.batchSize ?? 1000)) void this.flush();
  }

  /** Writes everything buffered so far; concurrent calls share one write. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.buffer.length === 0) return Promise.resolve();
    const batch = this.buffer;
    this.buffer = [];
    this.flushing = insertRequestLogEntries(this.db, batch)
      .catch((error: unknown) => {
        this.log.warn({ err: error, entries: batch.length }, 'request log write failed; will retry');
        this.buffer = batch.concat(this.buffer);
      })
      .finally(() => {
        this.flushing = null;
      });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    if (this.buffer.length > 0) await this.flush();
  }
}
