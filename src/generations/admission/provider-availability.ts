import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import type { CatalogEntry } from '../../catalog/catalog-entry.js';
import { providersDown } from '../../db/provider-health.js';
import { ApiError } from '../../vocabulary/errors.js';
import { InFlight } from '../../caches/in-flight.js';

/**
 * Which providers are down, as workers last recorded it (provider_health), held in memory: POST
 * asks on every request. Reloaded when PostgreSQL announces a change of state (`reload`) and every
 * `refreshMs` as a safety net.
 */
export class ProviderAvailability {
  private down = new Map<string, { probeAt: number }>();
  private timer: NodeJS.Timeout | null = null;
  private readonly reloads = new InFlight();

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
    await this.reloads.run(async () => {
      const next = new Map<string, { probeAt: number }>();
      for (const row of await providersDown(this.db))
        next.set(row.provider, { probeAt: row.probe_at ? Date.parse(row.probe_at) : Date.now() });
      this.down = next;
    });
  }

  /** Seconds until the provider is probed again, when it is down; null when it takes requests. */
  retryAfterSeconds(provider: string): number | null {
    const down = this.down.get(provider);
    if (!down) return null;
    return Math.max(1, Math.ceil((down.probeAt - Date.now()) / 1000));
  }

  /** No more reloads; resolves once the one running, if any, has ended. */
  stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    return this.reloads.stop();
  }
}

/**
 * What admitGeneration gives startGeneration as `refuseNew` (the API's POST and the console's
 * playground alike): undefined while the model's provider takes requests (`retryAfterSeconds` null), else a function
 * that throws the refusal, after `onRefused` (the API counts it in its metrics).
 */
export function refusalWhileDown(
  entry: CatalogEntry,
  retryAfterSeconds: number | null,
  onRefused?: () => void,
): (() => never) | undefined {
  if (retryAfterSeconds === null) return undefined;
  return () => {
    onRefused?.();
    throw providerDownError(entry, retryAfterSeconds);
  };
}

/**
 * The refusal of a new generation while its model's provider is down (the API's POST and the
 * console's playground alike): nothing charged, retry after the next probe with the same key.
 */
export function providerDownError(entry: CatalogEntry, retryAfterSeconds: number): ApiError {
  return new ApiError(
    'service_unavailable',
    `The provider of model ${entry.id} is unavailable, so no new generation was started. Nothing was charged; retry after ${retryAfterSeconds} s with the same Idempotency-Key and body.`,
    { retryAfterSeconds },
  );
}
