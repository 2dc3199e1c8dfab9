import type { Histogram } from 'prom-client';
import type { ProviderCall } from '../observability/metrics.js';
import {
  ProviderRejection,
  ProviderResultGone,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
} from '../providers/provider.js';

/** A call's outcome as the metrics label it: how it ended, never what it was about. */
function outcomeOf(error: unknown): string {
  if (error instanceof ProviderRejection) return 'rejected';
  if (error instanceof ProviderThrottled) return 'throttled';
  if (error instanceof ProviderTransientError) return 'transient';
  if (error instanceof ProviderUncertainError) return 'uncertain';
  if (error instanceof ProviderResultGone) return 'gone';
  return 'error';
}

/**
 * Wraps a provider so that every call (submit, status, fetch_result, lookup, cancel, probe) is
 * timed into `calls` by provider, call and outcome. A status call that reports a failed job is an
 * `ok` call: the provider answered.
 */
export function measureProvider(
  name: string,
  provider: Provider,
  calls: Histogram<'provider' | 'call' | 'outcome'>,
): Provider {
  async function timed<T>(call: ProviderCall, run: () => Promise<T>): Promise<T> {
    const end = calls.startTimer({ provider: name, call });
    try {
      const result = await run();
      end({ outcome: 'ok' });
      return result;
    } catch (error) {
      end({ outcome: outcomeOf(error) });
      throw error;
    }
  }
  return {
    submit: (job) => timed('submit', () => provider.submit(job)),
    // The create is the call timed; preparing it (our storage, the customer's images) is not one.
    prepare:
      provider.prepare &&
      (async (job) => {
        const { send } = await provider.prepare!(job);
        return { send: () => timed('submit', send) };
      }),
    status: (jobId, reason) => timed('status', () => provider.status(jobId, reason)),
    fetchResult: (jobId, index, result) =>
      timed('fetch_result', () => provider.fetchResult(jobId, index, result)),
    lookup: (token) => timed('lookup', () => provider.lookup(token)),
    cancel: (jobId) => timed('cancel', () => provider.cancel(jobId)),
    // Forwarded, or a client's cancel could never stop a queued job (the activity sees no method).
    // Timed as a cancel: it is one, asked of the same endpoint, and keeps the call label set as documented.
    stopBeforeRun:
      provider.stopBeforeRun &&
      ((jobId, asked) => timed('cancel', () => provider.stopBeforeRun!(jobId, asked))),
    probe: provider.probe && (() => timed('probe', () => provider.probe!())),
    submitsLocally: provider.submitsLocally,
    // Read by the submit (whether to send a webhook URL) and the wait: what the provider is, not a call.
    pushes: provider.pushes,
    pushesWithoutUrl: provider.pushesWithoutUrl,
  };
}
