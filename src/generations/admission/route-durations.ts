import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { recentRouteDurations } from '../../db/route-durations.js';
import { InFlight } from '../../caches/in-flight.js';

/** How far back the measured durations reach, and how often they are read again. */
export const routeDurationWindowMinutes = 60;
export const routeDurationRefreshMs = 60_000;

/**
 * Each route's measured p50 duration for the models whose policy is `fastest`, held in memory:
 * admission and the quote plan routes on every request, so they read this copy, refreshed every
 * minute (a median over the last hour moves slowly; no notification is worth it). A model with no
 * `fastest` route costs no query.
 */
export class RouteDurations {
  private p50 = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private readonly reloads = new InFlight();

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly log: Logger,
    /** The models routed by `fastest` now (the catalog cache's). */
    private readonly models: () => readonly string[],
  ) {}

  async start(refreshMs = routeDurationRefreshMs): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => {
      this.reload().catch((error: unknown) =>
        this.log.warn({ err: error }, 'could not read the routes’ measured durations'),
      );
    }, refreshMs);
    this.timer.unref();
  }

  async reload(): Promise<void> {
    await this.reloads.run(async () => {
      const next = new Map<string, number>();
      for (const row of await recentRouteDurations(this.db, this.models(), routeDurationWindowMinutes))
        next.set(`${row.model}\n${row.provider}`, row.p50_ms);
      this.p50 = next;
    });
  }

  /** The route's measured p50 in milliseconds; undefined when it has no recent success (unknown). */
  p50Ms(model: string, provider: string): number | undefined {
    return this.p50.get(`${model}\n${provider}`);
  }

  /** No more reloads; resolves once the one running, if any, has ended. */
  stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    return this.reloads.stop();
  }
}

/** The catalog's models routed by `fastest`: the only ones whose durations are read. */
export function fastestModels(catalog: Pick<CatalogCache, 'list'>): string[] {
  return catalog
    .list()
    .filter((model) => model.entry.routing?.policy === 'fastest')
    .map((model) => model.entry.id);
}
