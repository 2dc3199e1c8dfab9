import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/service-config.js';
import { createDatabasePool, type DatabasePool } from '../../src/db/pool.js';
import { PostgresBudgetStore } from '../../src/providers/budget-postgres-store.js';
import { createLogger } from '../../src/process/logger.js';
import { providerBudgetMetrics } from '../../src/providers/request-budget-metrics.js';
import { ProviderThrottled, type Provider, type ProviderJob } from '../../src/providers/provider.js';
import { ReplicateProvider } from '../../src/providers/replicate/replicate-provider.js';
import {
  ProviderBudget,
  type BudgetLimits,
  type BudgetMetrics,
  type BudgetStore,
} from '../../src/providers/request-budget.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { budgetProvider } from '../../src/worker/budgeted-provider.js';
import { activityDeps } from '../../src/worker/worker-deps.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { promptContains } from '../support/providers/fake-http.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';

/**
 * The request budget around the real Replicate adapter, against the Replicate stand-in: what each
 * call is let send, and what is never sent. Two budget instances with stores of their own
 * connections are two workers sharing the account's budget in PostgreSQL.
 */
describe('the request budget of a provider account', () => {
  let db: TestDatabase;
  let secondPool: DatabasePool;
  let replicate: ReplicateServer;
  let storageDir: string;
  let storage: LocalStorage;
  let workerA: BudgetStore;
  let workerB: BudgetStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    secondPool = await createDatabasePool(db.url, { maximumPoolSize: 2 });
    workerA = new PostgresBudgetStore(db.pool);
    workerB = new PostgresBudgetStore(secondPool);
    replicate = await ReplicateServer.start();
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'request-budget-'));
    storage = new LocalStorage(storageDir, 'https://results.example.test');
  });
  afterAll(async () => {
    await replicate?.close();
    await secondPool?.end();
    await db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  const adapter = () =>
    new ReplicateProvider({
      apiUrl: replicate.env().REPLICATE_API_URL!,
      token: replicate.token,
      storage,
      download: { allowCidrs: ['127.0.0.1/32'], allowHttp: true },
    });
  /** The adapter under an account's budget (`account`: the budget's key, one per test), as a worker composes it. */
  const budgeted = (
    account: string,
    limits: Partial<BudgetLimits & { createWaitMs: number; readWaitMs: number; fallbackShare: number }>,
    store = workerA,
    metrics?: BudgetMetrics,
  ) =>
    budgetProvider(
      adapter(),
      new ProviderBudget(
        account,
        store,
        {
          createsPerMinute: 600,
          requestsPerMinute: 3_000,
          fallbackShare: 0.5,
          createWaitMs: 1_000,
          readWaitMs: 5_000,
          ...limits,
        },
        metrics,
      ),
    );
  const job = (prompt: string): ProviderJob => ({
    token: `tok_${prompt}`,
    model: 'replicate-test',
    mediaType: 'image',
    prompt,
    options: {},
    images: [],
    longEdgePx: 1024,
    target: { model: 'black-forest-labs/flux-schnell', input: { prompt } },
  });
  /** A prediction that stays running until released, created without any budget. */
  const running = async (prompt: string) => {
    replicate.script({ hold: true }, promptContains(prompt));
    return (await adapter().submit(job(prompt))).jobId;
  };
  const sent = () => replicate.requests.length;

  it('skips fallback reads first: answered still running, nothing sent, while pushed reads and creates go', async () => {
    const id = await running('[fallback]');
    // 20 other requests a minute: a burst of 2, then one every 3.3 s.
    const provider = budgeted('replicate-fallback', { requestsPerMinute: 20 });
    const before = sent();
    expect(await provider.status(id, 'fallback')).toEqual({ state: 'running' });
    // Half the burst is used: the next fallback read gives way, on either worker.
    const elsewhere = budgeted('replicate-fallback', { requestsPerMinute: 20 }, workerB);
    expect(await elsewhere.status(id, 'fallback')).toEqual({ state: 'running', skipped: 'budget' });
    expect(sent()).toBe(before + 1);
    // A pushed read still has its turn at once, and so has a create (an allowance of its own).
    expect(await elsewhere.status(id, 'pushed')).toEqual({ state: 'running' });
    replicate.script({ hold: true }, promptContains('[fallback create]'));
    const creates = replicate.creates;
    await provider.submit(job('[fallback create]'));
    expect(replicate.creates).toBe(creates + 1);
    expect(sent()).toBe(before + 3);
  });

  it('makes a create wait its turn, then fails it as throttled and not accepted, with nothing sent', async () => {
    // 60 creates a minute: a burst of 6, then one every 1.1 s; a create waits 1.5 s at most.
    let takes = 0;
    const counted: BudgetStore = {
      take: (ask) => ((takes += 1), workerA.take(ask)),
      pause: (provider, ms) => workerA.pause(provider, ms),
      close: () => workerA.close(),
    };
    const provider = budgeted('replicate-creates', { createsPerMinute: 60, createWaitMs: 1_500 }, counted);
    for (let i = 0; i < 6; i++) replicate.script({ hold: true }, promptContains(`[burst ${i}]`));
    const creates = replicate.creates;
    await Promise.all(Array.from({ length: 6 }, (_, i) => provider.submit(job(`[burst ${i}]`))));
    expect(replicate.creates).toBe(creates + 6);
    // Three more at once, prepared as the submit does: one waits its turn (1.1 s) and is sent; the
    // others' turns are 2.2 s and 3.3 s away, past the wait: refused before the create is marked sent.
    const later = [0, 1, 2].map((i) => job(`[after the burst ${i}]`));
    for (const each of later) replicate.script({ hold: true }, promptContains(each.prompt));
    const create = async (each: ProviderJob) => {
      const { send } = await provider.prepare!(each);
      return send();
    };
    const started = Date.now();
    const attempts = await Promise.allSettled(later.map(create));
    const refused = later.flatMap((each, i) => {
      const attempt = attempts[i]!;
      return attempt.status === 'rejected' ? [{ each, error: attempt.reason as ProviderThrottled }] : [];
    });
    expect(attempts.filter((a) => a.status === 'fulfilled')).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThan(500);
    expect(refused).toHaveLength(2);
    for (const { error } of refused) {
      expect(error).toBeInstanceOf(ProviderThrottled);
      expect(error).toMatchObject({
        provesNotAccepted: true,
        message: expect.stringMatching(/nothing was sent/),
      });
    }
    expect(replicate.creates).toBe(creates + 7);

    // Each refused create kept its own turn, and was told when it comes: about 2.2 s and 3.3 s
    // after they all asked, not the same moment for both.
    const comeBack = refused.map(({ error }) => error.retryAfterMs!).sort((a, b) => a - b);
    expect(comeBack[0]).toBeGreaterThan(1_500);
    expect(comeBack[1]! - comeBack[0]!).toBeGreaterThan(800);
    // Coming back when told, each is sent at once, without asking the budget again.
    const asked = takes;
    await Promise.all(
      refused.map(async ({ each, error }) => {
        await new Promise((resolve) => setTimeout(resolve, error.retryAfterMs));
        const from = Date.now();
        await create(each);
        expect(Date.now() - from).toBeLessThan(1_500);
      }),
    );
    expect(takes).toBe(asked);
    expect(replicate.creates).toBe(creates + 9);
  });

  it('pauses the account for every worker after a 429 with Retry-After, fallback reads the longest', async () => {
    const id = await running('[throttled]');
    const first = budgeted('replicate-429', {}, workerA);
    const second = budgeted('replicate-429', { readWaitMs: 300 }, workerB);
    const patient = budgeted('replicate-429', { readWaitMs: 5_000 }, workerB);
    replicate.failPolls({ kind: 'status', status: 429, retryAfter: 1 });
    await expect(first.status(id, 'poll')).rejects.toBeInstanceOf(ProviderThrottled);
    const before = sent();
    // The other worker sends nothing during the pause: a read on a timer (a fallback read, a poll)
    // gives way, a pushed read that may not wait a second fails as throttled (after the pause), one
    // that may waits it out.
    expect(await second.status(id, 'fallback')).toEqual({ state: 'running', skipped: 'budget' });
    expect(await second.status(id, 'poll')).toEqual({ state: 'running', skipped: 'budget' });
    const refused = await second.status(id, 'pushed').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ProviderThrottled);
    expect((refused as ProviderThrottled).retryAfterMs).toBeGreaterThan(500);
    expect(sent()).toBe(before);
    const started = Date.now();
    expect(await patient.status(id, 'pushed')).toEqual({ state: 'running' });
    expect(Date.now() - started).toBeGreaterThan(500);
    expect(sent()).toBe(before + 1);
    // Fallback reads stay paused twice as long as the Retry-After.
    expect(await second.status(id, 'fallback')).toEqual({ state: 'running', skipped: 'budget' });
    expect(sent()).toBe(before + 1);
  });

  it('counts the requests sent by provider and kind, the fallback reads skipped and the 429s', async () => {
    const registry = new Registry();
    const limits = { createsPerMinute: 600, requestsPerMinute: 600 };
    const metrics = providerBudgetMetrics(registry, { 'replicate-counted': limits });
    // A burst of 60: nothing waits; fallback reads may use 2 % of it, one read.
    const provider = budgeted('replicate-counted', { ...limits, fallbackShare: 0.02 }, workerA, metrics);
    replicate.script({ hold: true, pollsStarting: 10 }, promptContains('[counted]'));
    const { jobId } = await provider.submit(job('[counted]'));
    await provider.status(jobId, 'fallback');
    await provider.status(jobId, 'fallback'); // skipped
    await provider.stopBeforeRun!(jobId); // a read, then a cancel (it is still starting)
    await provider.cancel(jobId);
    replicate.failPolls({ kind: 'status', status: 429, retryAfter: 0 });
    await expect(provider.status(jobId, 'pushed')).rejects.toBeInstanceOf(ProviderThrottled);
    await provider.probe!();
    const values = async (name: string) =>
      Object.fromEntries(
        ((await registry.getSingleMetric(name)?.get())?.values ?? []).map((v) => [
          [v.labels.kind, v.labels.allowance].filter(Boolean).join(','),
          v.value,
        ]),
      );
    expect(await values('provider_requests_total')).toEqual({
      create: 1,
      status: 3, // the fallback read, stopBeforeRun's read, the throttled read
      cancel: 2,
      probe: 1,
    });
    expect(await values('provider_fallback_reads_skipped_total')).toEqual({ '': 1 });
    expect(await values('provider_throttled_total')).toEqual({ status: 1 });
    expect(await values('provider_budget_limit_per_minute')).toEqual({ create: 600, other: 600 });
  });

  it('is composed into the worker’s providers from the settings (activityDeps)', async () => {
    const config = loadConfig({
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
      STORAGE_DIR: storageDir,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      ...replicate.env(),
      REPLICATE_REQUESTS_PER_MINUTE: '20',
    });
    const { deps } = activityDeps(config, db.pool, createLogger('budget-test', 'silent'), {
      temporal: () => Promise.reject(new Error('not used here')),
    });
    const id = await running('[worker deps]');
    const worker: Provider = deps.providerFor('replicate');
    const before = sent();
    expect(await worker.status(id, 'fallback')).toEqual({ state: 'running' });
    expect(await worker.status(id, 'fallback')).toEqual({ state: 'running', skipped: 'budget' });
    expect(sent()).toBe(before + 1);
  });
});
