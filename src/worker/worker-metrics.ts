import type { Logger } from 'pino';
import { Gauge, type Histogram, type Registry } from 'prom-client';
import type { CommonQueryMethods } from 'slonik';
import { generationsNeedingReviewByModel, queuedGenerationsByModel } from '../db/operational-gauges.js';
import { providerHealthReport } from '../db/provider-health.js';
import type { BudgetLimits, BudgetMetrics } from '../providers/request-budget.js';
import { providerBudgetMetrics } from '../providers/request-budget-metrics.js';
import {
  createMetricsRegistry,
  metricNames,
  providerCallHistogram,
  workerGenerationMetrics,
  type GenerationMetrics,
} from '../observability/metrics.js';

export interface WorkerMetrics {
  registry: Registry;
  generations: GenerationMetrics;
  providerCalls: Histogram<'provider' | 'call' | 'outcome'>;
  /** The providers' request budgets: requests by kind, waits, refusals, skipped fallback reads, 429s. */
  budget: BudgetMetrics;
}

/**
 * The worker's metrics: the counters its activities and provider calls move, and gauges read
 * from PostgreSQL at scrape time (queued, queued too long, needing review, provider circuits).
 * Those gauges say the same on every worker: aggregate them with max(), never sum().
 */
export function createWorkerMetrics(
  db: CommonQueryMethods,
  options: {
    /** A generation queued longer than this after its creation counts as queued too long. */
    queuedTooLongMs: number;
    /** The providers this worker serves: shown closed (0) until provider_health says otherwise. */
    providers: readonly string[];
    log: Logger;
    /** Each provider account's request budget, shown beside its requests. */
    budgets?: Readonly<Record<string, BudgetLimits>>;
  },
): WorkerMetrics {
  const registry = createMetricsRegistry();
  /** A gauge set from PostgreSQL at each scrape; a failed read drops its series rather than fail the scrape. */
  const fromDatabase = <L extends string>(
    name: string,
    help: string,
    labelNames: L[],
    read: (gauge: Gauge<L>) => Promise<void>,
  ) =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        try {
          await read(this);
        } catch (error) {
          this.reset();
          options.log.warn({ err: error, metric: name }, 'metrics: could not read a gauge from PostgreSQL');
        }
      },
    });

  // One query serves the three queued gauges of a scrape: prom-client starts every metric's collect
  // in the same tick, so they share the read in flight; the next scrape reads anew.
  let queuedRead: ReturnType<typeof queuedGenerationsByModel> | null = null;
  const queued = () =>
    (queuedRead ??= queuedGenerationsByModel(db, options.queuedTooLongMs).finally(() => {
      queuedRead = null;
    }));
  fromDatabase(metricNames.generationsQueued, 'Generations queued now, by model', ['model'], async (g) => {
    for (const row of await queued()) g.set({ model: row.model }, row.queued);
  });
  fromDatabase(
    metricNames.generationsQueuedTooLong,
    `Generations still queued more than QUEUED_TOO_LONG_MS (${options.queuedTooLongMs} ms) after they were created, by model`,
    ['model'],
    async (g) => {
      for (const row of await queued()) g.set({ model: row.model }, row.too_long);
    },
  );
  fromDatabase(
    metricNames.oldestQueuedAge,
    'Age of the oldest queued generation, by model',
    ['model'],
    async (g) => {
      for (const row of await queued()) g.set({ model: row.model }, row.oldest_age_seconds);
    },
  );
  fromDatabase(
    metricNames.generationsNeedingReview,
    'Generations marked for review now, by model',
    ['model'],
    async (g) => {
      for (const row of await generationsNeedingReviewByModel(db)) g.set({ model: row.model }, row.count);
    },
  );

  let healthRead: ReturnType<typeof providerHealthReport> | null = null;
  const health = () =>
    (healthRead ??= providerHealthReport(db).finally(() => {
      healthRead = null;
    }));
  fromDatabase(
    metricNames.providerCircuitOpen,
    'Whether a provider is down (1: its new generations are refused until a probe finds it up)',
    ['provider'],
    async (g) => {
      for (const name of options.providers) g.set({ provider: name }, 0);
      for (const row of await health()) g.set({ provider: row.provider }, row.state === 'down' ? 1 : 0);
    },
  );
  fromDatabase(
    metricNames.providerConsecutiveFailures,
    'Failed provider calls in a row (PROVIDER_DOWN_AFTER_FAILURES of them take it down)',
    ['provider'],
    async (g) => {
      for (const name of options.providers) g.set({ provider: name }, 0);
      for (const row of await health()) g.set({ provider: row.provider }, row.consecutive_failures);
    },
  );

  return {
    registry,
    generations: workerGenerationMetrics(registry),
    providerCalls: providerCallHistogram(registry),
    budget: providerBudgetMetrics(registry, options.budgets),
  };
}
