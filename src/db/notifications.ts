import pg from 'pg';
import type { Logger } from 'pino';

type Handler = (payload: string) => void;

/**
 * One dedicated connection that LISTENs for PostgreSQL notifications and hands
 * them to in-process caches. It reconnects on its own; after any reconnect the
 * `onReconnect` handlers run, because notifications sent while it was away are
 * lost and caches must start afresh.
 */
export class NotificationListener {
  private client: pg.Client | null = null;
  private readonly handlers = new Map<string, Handler[]>();
  private readonly reconnectHandlers: Array<() => void> = [];
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: Logger,
  ) {}

  on(channel: string, handler: Handler): this {
    this.handlers.set(channel, [...(this.handlers.get(channel) ?? []), handler]);
    return this;
  }

  /** Runs when the connection drops and again when it is back: notifications in between are lost. */
  onReconnect(handler: () => void): this {
    this.reconnectHandlers.push(handler);
    return this;
  }

  /** Whether notifications are being received now; caches must not be trusted while false. */
  get listening(): boolean {
    return this.client !== null;
  }

  /** Connects and LISTENs; resolves once listening (the first time, failures reject). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (message) => {
      for (const handler of this.handlers.get(message.channel) ?? []) handler(message.payload ?? '');
    });
    client.on('error', (error) => {
      this.log.warn({ err: error }, 'notification listener connection failed; reconnecting');
      this.scheduleReconnect();
    });
    client.on('end', () => this.scheduleReconnect());
    await client.connect();
    for (const channel of this.handlers.keys())
      await client.query(`LISTEN "${channel.replaceAll('"', '""')}"`);
    this.client = client;
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    if (this.client) {
      this.client = null;
      for (const handler of this.reconnectHandlers) handler();
    }
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect().then(
        () => {
          for (const handler of this.reconnectHandlers) handler();
        },
        (error: unknown) => {
          this.log.warn({ err: error }, 'notification listener could not reconnect; trying again');
          this.scheduleReconnect();
        },
      );
    }, 1000);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
