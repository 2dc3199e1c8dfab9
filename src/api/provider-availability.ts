import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import { providersDown } from '../db/provider-health.js';

/**
 * Which providers are down, as workers last recorded it (provider_health), held in memory: POST
 * asks on every request. Reloaded when PostgreSQL announces a change of state (`reload`) and every
 * `refreshMs` as a safety net.
 */
export class ProviderAvailability {
  private down = new Map<string, { probeAt: number }>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly log: Logger,
  ) {}

  async start(refreshMs: number): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => this.reloadInBackground(), refreshMs);
    this.timer.unref();
  }

  reloadInBackground(): void {
    this.reload().catch((error: unknown) =>
      this.log.warn({ err: error }, 'could not read which providers are down'),
    );
  }

  async reload(): Promise<void> {
    const next = new Map<string, { probeAt: number }>();
    for (const row of await providersDown(this.db))
      next.set(row.provider, { probeAt: row.probe_at ? Date.parse(row.probe_at) : Date.now() });
    this.down = next;
  }

  /** Seconds until the provider is probed again, when it is down; null when it takes requests. */
  retryAfterSeconds(provider: string): number | null {
    const down = this.down.get(provider);
    if (!down) return null;
    return Math.max(1, Math.ceil((down.probeAt - Date.now()) / 1000));
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
