import { Counter, Gauge, type Registry } from 'prom-client';
import { metricNames } from '../observability/metrics.js';
import type { BudgetLimits, BudgetMetrics } from './request-budget.js';

/**
 * The providers' request budgets (src/providers/request-budget.ts): requests sent by provider and
 * kind, the waits for a turn, the refusals past a wait, the fallback reads skipped and the 429s
 * received; and each allowance's limit, to read the requests against.
 */
export function providerBudgetMetrics(
  registry: Registry,
  limits: Readonly<Record<string, BudgetLimits>> = {},
): BudgetMetrics {
  const byKind = (name: string, help: string) =>
    new Counter({ name, help, labelNames: ['provider', 'kind'], registers: [registry] });
  const sent = byKind(
    metricNames.providerRequests,
    'Requests sent to a provider’s API, by provider and kind (create, status, result, cancel, probe)',
  );
  const waits = byKind(
    metricNames.providerBudgetWaits,
    'Requests that waited for their turn in the request budget',
  );
  const waitSeconds = byKind(
    metricNames.providerBudgetWaitSeconds,
    'Seconds requests waited for their turn in the request budget',
  );
  const refusals = byKind(
    metricNames.providerBudgetRefusals,
    'Requests refused by the request budget past their wait: failed as throttled, nothing sent',
  );
  const throttled = byKind(
    metricNames.providerThrottled,
    '429 answers received from a provider, by the request’s kind',
  );
  const skipped = new Counter({
    name: metricNames.providerFallbackReadsSkipped,
    help: 'Fallback status reads the request budget skipped (answered still running, nothing sent), by provider',
    labelNames: ['provider'],
    registers: [registry],
  });
  const limit = new Gauge({
    name: metricNames.providerBudgetLimit,
    help: 'Each provider account’s request budget per minute, by allowance (create, other); 0: none',
    labelNames: ['provider', 'allowance'],
    registers: [registry],
  });
  for (const [provider, set] of Object.entries(limits)) {
    limit.set({ provider, allowance: 'create' }, set.createsPerMinute);
    limit.set({ provider, allowance: 'other' }, set.requestsPerMinute);
  }
  return {
    sent: (provider, kind) => sent.inc({ provider, kind }),
    waited(provider, kind, ms) {
      waits.inc({ provider, kind });
      waitSeconds.inc({ provider, kind }, ms / 1000);
    },
    refused: (provider, kind) => refusals.inc({ provider, kind }),
    skipped: (provider) => skipped.inc({ provider }),
    throttled: (provider, kind) => throttled.inc({ provider, kind }),
  };
}
