import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../src/process/logger.js';
import { ProviderTransientError, type Provider, type ProviderStatus } from '../../src/providers/provider.js';
import { startProbing, trackHealth, type HealthPolicy } from '../../src/worker/provider-health-tracker.js';
import { runAdminCli } from '../support/admin.js';
import { bearer } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * A provider that goes away: the stand-in for a real one whose connections are refused. Every call
 * fails as a refused connection does while `down`; its probe too.
 */
function outage(simulated: Provider) {
  const state = { down: false, submits: 0 };
  const guard = <T>(call: () => Promise<T>) =>
    state.down
      ? Promise.reject(new ProviderTransientError('connection refused (test outage); nothing was sent'))
      : call();
  const provider: Provider = {
    submit: (job) => guard(() => ((state.submits += 1), simulated.submit(job))),
    status: (jobId) => guard(() => simulated.status(jobId)),
    fetchResult: (jobId, index, result) => guard(() => simulated.fetchResult(jobId, index, result)),
    lookup: (token) => guard(() => simulated.lookup(token)),
    cancel: (jobId) => guard(() => simulated.cancel(jobId)),
    probe: () => guard(() => Promise.resolve()),
  };
  return { state, provider };
}

const policy: HealthPolicy = { downAfter: 3, probeIntervalMs: 1_000 };

describe('a provider that is down', () => {
  let simulatedOutage: ReturnType<typeof outage>;
  let stopProbing: () => Promise<void> = () => Promise.resolve();
  const stack = useGenerationStack({
    worker: {
      simDelayMs: 100,
      wrapProvider: (simulated) => {
        simulatedOutage = outage(simulated);
        return simulatedOutage.provider;
      },
    },
  });
  beforeAll(() => {
    // As the worker does: the provider's calls are counted in provider_health, and a down one probed.
    const log = createLogger('provider-health-test', 'silent');
    const tracked = trackHealth('simulated', simulatedOutage.provider, stack.db.pool, policy, log);
    stack.worker.deps.providerFor = () => tracked;
    stopProbing = startProbing(new Map([['simulated', tracked]]), stack.db.pool, policy, log);
  });
  afterAll(() => stopProbing());

  const healthOf = () =>
    stack.db.pool.maybeOne(sql.type(z.object({ state: z.string(), consecutive_failures: z.number() }))`
      SELECT state, consecutive_failures FROM provider_health WHERE provider = 'simulated'`);
  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;

  it('refuses new POSTs before the debit with 503 and Retry-After, then takes them again once a probe finds it up', async () => {
    simulatedOutage.state.down = true;
    // Admitted while it was still taken for up: debited, queued, its submission retried in the background.
    const early = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: 'during the outage' },
      'outage-early',
    );
    expect(early.statusCode).toBe(202);
    expect(early.json().status).toBe('queued');
    await waitFor(async () => (await healthOf())?.state === 'down', 20_000);
    // The API learns it by NOTIFY, a moment after the row changed.
    await waitFor(() => Promise.resolve(stack.api.providers.retryAfterSeconds('simulated') !== null), 5_000);

    const creditsBefore = await balance();
    const refused = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: 'refused' },
      'outage-refused',
    );
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error).toMatchObject({
      code: 'service_unavailable',
      message: expect.stringContaining('Nothing was charged'),
    });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await balance()).toBe(creditsBefore);
    const submitsWhileDown = simulatedOutage.state.submits;
    expect(submitsWhileDown).toBe(0);

    // Operators see it.
    const report = await runAdminCli(['providers'], stack.db.url);
    expect(report.code).toBe(0);
    expect(report.stdout).toMatch(/simulated {2}down {2}\d+ failures in a row/);

    simulatedOutage.state.down = false;
    await waitFor(async () => (await healthOf())?.state === 'up', 10_000);
    await waitFor(() => Promise.resolve(stack.api.providers.retryAfterSeconds('simulated') === null), 5_000);
    const retried = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: 'refused' },
      'outage-refused',
    );
    expect(retried.statusCode).toBe(202);
    const later = await pollGeneration(stack.api, stack.account.key, retried.json().id as string);
    expect(later.status).toBe('succeeded');

    // The generation admitted during the outage was never refunded: it went through once the provider was back.
    const first = await pollGeneration(
      stack.api,
      stack.account.key,
      early.json().id as string,
      undefined,
      60_000,
    );
    expect(first.status).toBe('succeeded');
    expect(await chargesOf(stack.db.pool, first.id as string)).toMatchObject({
      debits: 1,
      refunds: 0,
      submissions: 1,
    });
  }, 90_000);
});

describe('a provider account’s cap on jobs in flight', () => {
  const seen = { inFlight: 0, most: 0, submits: 0 };
  const stack = useGenerationStack({
    worker: {
      simDelayMs: 600,
      overrides: { inFlightCap: () => 1 },
      wrapProvider: (simulated) => ({
        ...simulated,
        submit: async (job) => {
          seen.submits += 1;
          seen.inFlight += 1;
          seen.most = Math.max(seen.most, seen.inFlight);
          return simulated.submit(job);
        },
        status: async (jobId): Promise<ProviderStatus> => {
          const status = await simulated.status(jobId);
          if (status.state !== 'running') seen.inFlight -= 1;
          return status;
        },
        fetchResult: (jobId, index, result) => simulated.fetchResult(jobId, index, result),
        lookup: (token) => simulated.lookup(token),
        cancel: (jobId) => simulated.cancel(jobId),
      }),
    },
  });

  it('keeps a burst waiting in our queue: one job at the provider at a time, every generation succeeds once', async () => {
    const posted = await Promise.all(
      [1, 2, 3].map((n) =>
        createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt: `burst ${n}` }),
      ),
    );
    expect(posted.map((r) => r.statusCode)).toEqual([202, 202, 202]);
    const ended = await Promise.all(
      posted.map((r) =>
        pollGeneration(stack.api, stack.account.key, r.json().id as string, undefined, 60_000),
      ),
    );
    expect(ended.map((g) => g.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(seen.most).toBe(1);
    expect(seen.submits).toBe(3);
    for (const g of ended)
      expect(await chargesOf(stack.db.pool, g.id as string)).toMatchObject({
        debits: 1,
        refunds: 0,
        submissions: 1,
      });
    // Every place was given back.
    const held = await stack.db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
      SELECT count(*)::int AS n FROM provider_slots`);
    expect(held).toBe(0);
  }, 90_000);
});
