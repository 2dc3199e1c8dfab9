import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { OutageLog } from './redis-outage-log.js';

/** After a command fails while the connection looks up, Redis is left alone this long. */
const pauseAfterFailureMs = 1_000;

/**
 * A Redis (or Valkey) connection for state that every process shares but none must wait for: the
 * API's rate limits, the providers' request budgets. It fails fast rather than queue (a command
 * sent while disconnected is refused at once, one Redis does not answer within `commandTimeoutMs`
 * is abandoned), and says when its user should count in this process's memory instead (`usable`):
 * while disconnected, and for a second after a command failed. Outages reach the log as OutageLog
 * tells them: one line when Redis goes, a reminder a minute, one when it is back.
 */
export class FailOpenRedis<Client extends Redis = Redis> {
  readonly client: Client;
  private readonly outage: OutageLog;
  /** Commands are not sent before this (a failure while connected pauses them). */
  private pausedUntil = 0;
  private closing = false;

  constructor(options: {
    url: string;
    commandTimeoutMs: number;
    logger: Logger;
    /** How the connection is named to Redis (CLIENT LIST). */
    connectionName: string;
    /** What is counted in memory during an outage, as the log lines name it. */
    what: string;
    scripts?: RedisOptions['scripts'];
  }) {
    this.outage = new OutageLog(options.logger, redisAddress(options.url), options.what);
    this.client = new Redis(options.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: Math.max(1_000, options.commandTimeoutMs * 4),
      retryStrategy: (attempt) => Math.min(100 * 2 ** Math.min(attempt, 5), 2_000),
      connectionName: options.connectionName,
      ...(options.scripts ? { scripts: options.scripts } : {}),
    }) as Client;
    this.client.on('error', (error: Error) => this.outage.failed(error));
    this.client.on('close', () => {
      if (!this.closing) this.outage.failed(new Error('connection closed'));
    });
    this.client.on('ready', () => this.outage.recovered());
  }

  /**
   * Resolves once connected or after `ms`, and with `stopAtFirstError` once the first attempt
   * failed too: a start waits a moment for the first connection, so that its first requests are
   * shared too, and no longer (a refused connection need not be waited for).
   */
  async ready(ms = 2_000, stopAtFirstError = true): Promise<void> {
    if (this.connected()) return;
    await new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.client.off('ready', finish);
        this.client.off('error', finish);
        resolve();
      };
      const timer = setTimeout(finish, ms);
      this.client.once('ready', finish);
      if (stopAtFirstError) this.client.once('error', finish);
    });
    if (!this.connected()) this.outage.failed(new Error(`not connected (${this.client.status})`));
  }

  private connected(): boolean {
    return this.client.status === 'ready';
  }

  /** Whether to send a command now; when not, the caller counts in memory (and that is counted for the log). */
  usable(): boolean {
    if (this.connected() && Date.now() >= this.pausedUntil) return true;
    this.outage.countedLocally();
    return false;
  }

  /** A command answered: an outage, if one was logged, is over. */
  answered(): void {
    this.outage.recovered();
  }

  /** A command failed: Redis is left alone a second, and the outage logged. */
  failed(error: unknown): void {
    this.pausedUntil = Date.now() + pauseAfterFailureMs;
    this.outage.failed(error instanceof Error ? error : new Error(String(error)));
  }

  close(): void {
    this.closing = true;
    this.outage.stop();
    this.client.disconnect();
  }
}

/** host:port of a Redis URL: what the log may name (the URL can hold a password). */
export function redisAddress(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '6379'}`;
  } catch {
    return 'the REDIS_URL server';
  }
}
