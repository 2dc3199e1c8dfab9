import type { Logger } from 'pino';

/** While Redis stays away, a reminder is logged at most this often (one line, not one per request). */
const outageLogIntervalMs = 60_000;

/**
 * The log of Redis outages: one warning when Redis goes away, a reminder at most once a minute while
 * it stays away (with how many requests were counted in memory meanwhile), and one line when it is
 * back. ioredis reports every failed reconnection; none of those reach the log on their own.
 */
export class OutageLog {
  private downSince: number | null = null;
  private lastLogAt = 0;
  private errorsSinceLog = 0;
  private localSinceLog = 0;
  private lastError = '';
  private reminder: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    private readonly address: string,
    /** What is counted in memory meanwhile, as the log lines name it. */
    private readonly what = 'rate limits',
  ) {}

  failed(error: Error): void {
    this.errorsSinceLog += 1;
    this.lastError = error.message;
    if (this.downSince !== null) return;
    this.downSince = Date.now();
    this.lastLogAt = this.downSince;
    this.log.warn(
      { redis: this.address, err: { message: error.message } },
      `Redis unreachable or not answering: ${this.what} are counted in this process only until it is back`,
    );
    this.errorsSinceLog = 0;
    this.localSinceLog = 0;
    this.reminder = setInterval(() => this.remind(), outageLogIntervalMs);
    this.reminder.unref();
  }

  countedLocally(): void {
    if (this.downSince !== null) this.localSinceLog += 1;
  }

  /** Called on every answer from Redis: a no-op unless it had been away. */
  recovered(): void {
    if (this.downSince === null) return;
    this.log.info(
      { redis: this.address, down_ms: Date.now() - this.downSince, counted_locally: this.localSinceLog },
      `Redis reachable again: ${this.what} are shared again`,
    );
    this.downSince = null;
    this.stop();
  }

  stop(): void {
    clearInterval(this.reminder);
    this.reminder = undefined;
  }

  private remind(): void {
    if (this.downSince === null || Date.now() - this.lastLogAt < outageLogIntervalMs - 100) return;
    this.lastLogAt = Date.now();
    this.log.warn(
      {
        redis: this.address,
        down_ms: this.lastLogAt - this.downSince,
        errors: this.errorsSinceLog,
        counted_locally: this.localSinceLog,
        err: { message: this.lastError },
      },
      `Redis still unreachable: ${this.what} are counted in this process only`,
    );
    this.errorsSinceLog = 0;
    this.localSinceLog = 0;
  }
}
