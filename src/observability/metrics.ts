import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

/**
 * Prometheus metrics, one registry per process (the API, the worker and the result host each have
 * their own and serve it on a port of their own: see metrics-server.ts). Every name our code
 * registers is listed in `metricNames`, which the Grafana dashboard's test checks its queries against.
 *
 * Counters count events where they happen, once: a generation's outcome is counted by the activity
 * whose statement made the change, and only when that statement changed the row (a retried
 * activity that finds the work done counts nothing). They start from zero with the process, as
 * Prometheus counters do; `rate()` and `increase()` see through restarts. Facts that outlive a
 * process (what is queued, which provider is down) are gauges read from PostgreSQL at scrape time.
 */
export const metricNames = {
  httpRequestDuration: 'http_request_duration_seconds',
  generationsAdmitted: 'generations_admitted_total',
  generationsRejected: 'generations_rejected_total',
  generationsSucceeded: 'generations_succeeded_total',
  generationsFailed: 'generations_failed_total',
  generationsRefunded: 'generations_refunded_total',
  generationsSentToReview: 'generations_sent_to_review_total',
  creditsDebited: 'credits_debited_total',
  creditsRefunded: 'credits_refunded_total',
  providerCallDuration: 'provider_call_duration_seconds',
  providerCircuitOpen: 'provider_circuit_open',
  providerConsecutiveFailures: 'provider_consecutive_failures',
  generationsQueued: 'generations_queued',
  generationsQueuedTooLong: 'generations_queued_too_long',
  oldestQueuedAge: 'generations_oldest_queued_age_seconds',
  generationsNeedingReview: 'generations_needing_review',
  routeAttempts: 'route_attempts_total',
  routeFailovers: 'route_failovers_total',
  generationsServed: 'generations_served_total',
  mcpPreviewsMade: 'mcp_previews_made_total',
  providerRequests: 'provider_requests_total',
  providerBudgetLimit: 'provider_budget_limit_per_minute',
  providerBudgetWaits: 'provider_budget_waits_total',
  providerBudgetWaitSeconds: 'provider_budget_wait_seconds_total',
  providerBudgetRefusals: 'provider_budget_refusals_total',
  providerFallbackReadsSkipped: 'provider_fallback_reads_skipped_total',
  providerThrottled: 'provider_throttled_total',
  // Registered by the provider webhook route (API) and the workflow's fallback reads (worker):
  // named here so that the dashboard's provider panels read them.
  providerWebhooks: 'provider_webhooks_total',
  providerFallbackReadsFoundEnd: 'provider_fallback_reads_found_end_total',
} as const;

/** A registry with Node's own process metrics (CPU, memory, event loop lag, GC) in it. */
export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Seconds: 5 ms to 2 minutes (a POST waits for admission; a provider call can take a minute). */
const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** A POST that names a model and is refused (by the API, or by admission in the worker), by error code. */
function rejectedCounter(registry: Registry): Counter<'model' | 'code'> {
  return new Counter({
    name: metricNames.generationsRejected,
    help: 'Generation requests refused, by model and error code (recorded rejections, and 503s for a provider that is down)',
    labelNames: ['model', 'code'],
    registers: [registry],
  });
}

/** What the API counts of generations: its own refusals (validation, a provider that is down). */
export class ApiGenerationMetrics {
  private readonly rejectedTotal: Counter<'model' | 'code'>;
  constructor(registry: Registry) {
    this.rejectedTotal = rejectedCounter(registry);
  }
  rejected(model: string, code: string): void {
    this.rejectedTotal.inc({ model, code });
  }
}

/**
 * What the worker counts of generations, each where its transition commits: admission (debit or
 * refusal), success, the refund path (failed, refunded), and review.
 */
export interface GenerationMetrics {
  admitted(model: string, credits: number): void;
  rejected(model: string, code: string): void;
  succeeded(model: string): void;
  /**
   * Ended failed through the refund path; `refundedCredits` null when nothing was returned (there
   * was no debit, or the charge stands: a cancel stopped a job the provider had started).
   */
  failed(model: string, code: string, refundedCredits: number | null): void;
  sentToReview(model: string): void;
  /**
   * A route attempt's outcome, once, when its statement recorded it (issue 29): `accepted` (the
   * provider has the job), `not_accepted` (it proved it did not take it), `never_started` (a job it
   * had accepted, reported never started: the same attempt counted `accepted` before).
   */
  routeAttempt(provider: string, outcome: RouteAttemptOutcome): void;
  /** A generation's attempt on its second or later route, from the route before it. */
  failover(model: string, from: string, to: string): void;
  /** A generation that succeeded, by the provider whose job served it. */
  served(model: string, provider: string): void;
  /** A fallback read (a push was expected) found the job ended: the push was lost, late, or never sent. */
  fallbackReadFoundEnd(provider: string): void;
}

export type RouteAttemptOutcome = 'accepted' | 'not_accepted' | 'never_started';

/** Counts nothing: activities built without a registry (most tests). */
export const noGenerationMetrics: GenerationMetrics = {
  admitted: () => undefined,
  rejected: () => undefined,
  succeeded: () => undefined,
  failed: () => undefined,
  sentToReview: () => undefined,
  routeAttempt: () => undefined,
  failover: () => undefined,
  served: () => undefined,
  fallbackReadFoundEnd: () => undefined,
};

export function workerGenerationMetrics(registry: Registry): GenerationMetrics {
  const byModel = (name: string, help: string) =>
    new Counter({ name, help, labelNames: ['model'], registers: [registry] });
  const admitted = byModel(metricNames.generationsAdmitted, 'Generations admitted (debited), by model');
  const rejected = rejectedCounter(registry);
  const succeeded = byModel(metricNames.generationsSucceeded, 'Generations that succeeded, by model');
  const failed = new Counter({
    name: metricNames.generationsFailed,
    help: 'Generations that ended failed through the refund path, by model and error code (review is counted apart)',
    labelNames: ['model', 'code'],
    registers: [registry],
  });
  const refunded = byModel(metricNames.generationsRefunded, 'Generations whose debit was returned, by model');
  const review = byModel(
    metricNames.generationsSentToReview,
    'Generations marked for review (the provider may have run the job), by model',
  );
  const debited = byModel(metricNames.creditsDebited, 'Credits debited at admission, by model');
  const returned = byModel(metricNames.creditsRefunded, 'Credits returned by refunds, by model');
  const attempts = new Counter({
    name: metricNames.routeAttempts,
    help: 'Route attempts by provider and outcome (accepted; not_accepted: proven not taken; never_started: an accepted job the provider reports never started, counted accepted before)',
    labelNames: ['provider', 'outcome'],
    registers: [registry],
  });
  const failovers = new Counter({
    name: metricNames.routeFailovers,
    help: 'Attempts on a generation’s second or later route, by model, the route before (from) and this one (to)',
    labelNames: ['model', 'from', 'to'],
    registers: [registry],
  });
  const served = new Counter({
    name: metricNames.generationsServed,
    help: 'Generations that succeeded, by model and the provider that served them',
    labelNames: ['model', 'provider'],
    registers: [registry],
  });
  const foundEnd = new Counter({
    name: metricNames.providerFallbackReadsFoundEnd,
    help: 'Fallback reads (a push was expected) that found the job ended: pushes lost, late or never sent, by provider',
    labelNames: ['provider'],
    registers: [registry],
  });
  return {
    admitted(model, credits) {
      admitted.inc({ model });
      debited.inc({ model }, credits);
    },
    rejected: (model, code) => rejected.inc({ model, code }),
    succeeded: (model) => succeeded.inc({ model }),
    failed(model, code, refundedCredits) {
      failed.inc({ model, code });
      if (refundedCredits === null) return;
      refunded.inc({ model });
      returned.inc({ model }, refundedCredits);
    },
    sentToReview: (model) => review.inc({ model }),
    routeAttempt: (provider, outcome) => attempts.inc({ provider, outcome }),
    failover: (model, from, to) => failovers.inc({ model, from, to }),
    served: (model, provider) => served.inc({ model, provider }),
    fallbackReadFoundEnd: (provider) => foundEnd.inc({ provider }),
  };
}

/** The calls a provider adapter makes, as the provider metrics name them. */
export type ProviderCall = 'submit' | 'status' | 'fetch_result' | 'lookup' | 'cancel' | 'probe';

/** Every provider call's latency, by provider, call and outcome (the histogram's _count counts the calls). */
export function providerCallHistogram(registry: Registry): Histogram<'provider' | 'call' | 'outcome'> {
  return new Histogram({
    name: metricNames.providerCallDuration,
    help: 'Calls to a provider, by provider, call and outcome (ok, rejected, throttled, transient, uncertain, error)',
    labelNames: ['provider', 'call', 'outcome'],
    buckets: latencyBuckets,
    registers: [registry],
  });
}

/** HTTP requests answered, by route pattern (never the raw path), method and status. */
export function httpRequestHistogram(registry: Registry): Histogram<'route' | 'method' | 'status'> {
  return new Histogram({
    name: metricNames.httpRequestDuration,
    help: 'HTTP requests answered, by route pattern, method and status code (the _count counts requests)',
    labelNames: ['route', 'method', 'status'],
    buckets: latencyBuckets,
    registers: [registry],
  });
}

/**
 * What became of a provider's push (a webhook delivery to the API's provider-webhook route). Every
 * delivery for a provider the API takes is `received`, then `verified` or `refused` (401); a
 * verified one is then one of `signaled` (its generation's workflow woken), `late` (the generation
 * no longer waits for that job: ended, in review, or its run over), `unknown` (no such generation,
 * or it recorded another job: logged) or `early` (its generation has recorded no job yet: 503, the
 * provider sends it again). A delivery whose keys could not be fetched is `received` only (503).
 */
export type ProviderWebhookOutcome =
  'received' | 'verified' | 'refused' | 'signaled' | 'late' | 'unknown' | 'early';

/** Counts the API's provider webhooks by provider and outcome (ProviderWebhookOutcome). */
export class ProviderWebhookMetrics {
  private readonly total: Counter<'provider' | 'outcome'>;
  constructor(registry: Registry) {
    this.total = new Counter({
      name: metricNames.providerWebhooks,
      help: 'Provider webhook deliveries, by provider and outcome (received; verified or refused; then signaled, late, unknown or early)',
      labelNames: ['provider', 'outcome'],
      registers: [registry],
    });
  }
  count(provider: string, outcome: ProviderWebhookOutcome): void {
    this.total.inc({ provider, outcome });
  }
}
