import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import { InFlight } from '../caches/in-flight.js';
import {
  claimProbe,
  providersDown,
  recordProviderFailure,
  recordProviderSuccess,
} from '../db/provider-health.js';
import {
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
} from '../providers/provider.js';

export interface HealthPolicy {
  /** Failures in a row that take a provider down. */
  downAfter: number;
  /** How long a down provider waits between probes (and what Retry-After tells clients). */
  probeIntervalMs: number;
}

/**
 * Whether a failed call says the provider is unwell: it could not be reached, it failed (5xx,
 * timeouts, lost answers) or it refused our credentials. A 429 is the provider working as agreed;
 * a rejected input, an expired result, an uncertainty our own records hold (a worker that died
 * mid-call), or our own storage failing while a call was prepared (OwnStorageError: nothing was
 * sent) says nothing about it.
 */
function isOutage(error: unknown): boolean {
  if (error instanceof ProviderThrottled) return false;
  if (error instanceof ProviderUncertainError && error.fromRecord) return false;
  return error instanceof ProviderTransientError || error instanceof ProviderUncertainError;
}

/**
 * Wraps a provider so that every call's outcome is counted in provider_health, shared by all
 * processes: failures in a row take it down (API processes then refuse its new POSTs before the
 * debit), a success brings it back. A success is written only when this process does not already
 * know the provider healthy, and that knowledge lapses every 10 s, so polling costs no writes.
 */
export function trackHealth(
  name: string,
  provider: Provider,
  db: CommonQueryMethods,
  policy: HealthPolicy,
  log: Logger,
): Provider {
  let knownHealthyUntil = 0;
  async function observe<T>(call: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await call();
    } catch (error) {
      if (isOutage(error)) await failed(error);
      throw error;
    }
    if (Date.now() >= knownHealthyUntil) await succeeded();
    return result;
  }
  async function failed(error: unknown): Promise<void> {
    knownHealthyUntil = 0;
    try {
      const message = error instanceof Error ? error.message : String(error);
      const { row, wentDown } = await recordProviderFailure(db, name, message, {
        downAfter: policy.downAfter,
        probeAfterMs: policy.probeIntervalMs,
      });
      if (wentDown)
        log.error(
          { provider: name, failures: row.consecutive_failures, lastError: message, probeAt: row.probe_at },
          `provider ${name} is down: new generations for its models are refused (503) until a probe finds it up`,
        );
    } catch (recordError) {
      log.warn({ err: recordError, provider: name }, 'could not record a provider failure');
    }
  }
  async function succeeded(): Promise<void> {
    try {
      if (await recordProviderSuccess(db, name))
        log.warn({ provider: name }, `provider ${name} is up again: its models take new generations`);
      knownHealthyUntil = Date.now() + 10_000;
    } catch (recordError) {
      log.warn({ err: recordError, provider: name }, 'could not record a provider success');
    }
  }
  // Only the calls that reach the provider's API count: a create, a status poll and a probe. A
  // lookup may answer without asking anyone, a result comes from a file host of its own, and a
  // success that never left the process must not wipe out the failures of those that did.
  return {
    submit: (job) => (provider.submitsLocally ? provider.submit(job) : observe(() => provider.submit(job))),
    // Preparing reads our storage and the customer's images, never the provider: only the send counts.
    prepare:
      provider.prepare &&
      (async (job) => {
        const { send } = await provider.prepare!(job);
        return { send: () => (provider.submitsLocally ? send() : observe(send)) };
      }),
    status: (jobId, reason) => observe(() => provider.status(jobId, reason)),
    fetchResult: (jobId, index, result) => provider.fetchResult(jobId, index, result),
    lookup: (token) => provider.lookup(token),
    cancel: (jobId) => provider.cancel(jobId),
    // Forwarded (a client's cancel needs it), not observed: like cancel, it says little of health.
    stopBeforeRun: provider.stopBeforeRun && ((jobId, asked) => provider.stopBeforeRun!(jobId, asked)),
    probe: provider.probe && (() => observe(() => provider.probe!())),
    submitsLocally: provider.submitsLocally,
    pushes: provider.pushes,
    pushesWithoutUrl: provider.pushesWithoutUrl,
    expectedRunMs: provider.expectedRunMs,
  };
}

/**
 * Probes the down providers this worker can reach, each when its probe is due (one process probes
 * at a time: the claim moves the next probe on). A provider without a probe is simply let try
 * again: marked up, it goes down at its next failure in a row.
 */
export function startProbing(
  providers: ReadonlyMap<string, Provider>,
  db: CommonQueryMethods,
  policy: HealthPolicy,
  log: Logger,
): () => Promise<void> {
  let running = false;
  const ticks = new InFlight();
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      for (const row of await providersDown(db)) {
        const provider = providers.get(row.provider);
        if (!provider || !(await claimProbe(db, row.provider, policy.probeIntervalMs))) continue;
        try {
          // The tracked provider records the outcome itself; one without a probe is given its chance.
          if (provider.probe) await provider.probe();
          else if (await recordProviderSuccess(db, row.provider))
            log.warn(
              { provider: row.provider },
              `provider ${row.provider} is let try again (it has no probe)`,
            );
        } catch (error) {
          log.warn({ err: error, provider: row.provider }, `provider ${row.provider} is still down`);
        }
      }
    } catch (error) {
      log.warn({ err: error }, 'could not probe the providers that are down');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void ticks.run(tick), Math.min(5_000, policy.probeIntervalMs));
  timer.unref();
  // Stopped before the pool ends: a probe still querying it would fail, and say so.
  return () => {
    clearInterval(timer);
    return ticks.stop();
  };
}
