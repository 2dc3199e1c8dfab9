import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { metricNames } from '../../src/observability/metrics.js';
import { temporalSdkMetricNames } from '../../src/worker/temporal-runtime.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { scrape, type Scrape } from '../support/prometheus.js';
import { waitFor } from '../support/wait.js';
import { workerProcesses, type WorkerProcesses } from '../support/worker-process.js';

const model = 'lumen-lite';

/**
 * The metrics ports as the processes open them (METRICS_PORT on the API, WORKER_METRICS_PORT and
 * WORKER_TEMPORAL_METRICS_PORT on a real worker process), scraped before and after real
 * generations: each outcome moves its counter by exactly one, however often its activity or the
 * client's request is repeated.
 */
describe('metrics', () => {
  let db: TestDatabase;
  let api: ApiService;
  let workers: WorkerProcesses;
  let account: TestAccount;
  let storageDir: string;
  let apiMetrics: string;
  let workerMetrics: string;
  let temporalMetrics: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'metrics-results-'));
    const [apiPort, workerPort, temporalPort] = [await freePort(), await freePort(), await freePort()];
    const origin = (port: number) => `http://127.0.0.1:${port}`;
    [apiMetrics, workerMetrics, temporalMetrics] = [
      origin(apiPort),
      origin(workerPort),
      origin(temporalPort),
    ];
    const env = {
      DATABASE_URL: db.url,
      TEMPORAL_TASK_QUEUE: `metrics-${randomBase62(8)}`,
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9',
      PROVIDER_POLL_INTERVAL_MS: '50',
      SIM_PROVIDER_DELAY_MS: '100',
      QUEUED_TOO_LONG_MS: '60000',
    };
    workers = workerProcesses(() => ({
      ...env,
      WORKER_METRICS_PORT: String(workerPort),
      WORKER_TEMPORAL_METRICS_PORT: String(temporalPort),
      LOG_LEVEL: 'warn',
    }));
    await workers.start();
    api = await startTestApi(db.url, { ...env, METRICS_PORT: String(apiPort) });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(async () => {
    workers?.killAll();
    await api?.close();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  /** The change in each series between two scrapes. */
  const delta =
    (before: Scrape, after: Scrape) =>
    (name: string, labels: Record<string, string> = {}) =>
      after.value(name, labels) - before.value(name, labels);

  it('counts each outcome once: a success, a failure with its refund, review, and rejections by code', async () => {
    const [apiBefore, workerBefore] = [await scrape(apiMetrics), await scrape(workerMetrics)];

    // A success, asked twice with one Idempotency-Key: one admission, one debit.
    const body = { model, prompt: 'a lighthouse at dusk' };
    const created = await createGeneration(api, account.key, body, 'metrics-success');
    expect(created.statusCode).toBe(202);
    const price = created.json().credits as number;
    expect(price).toBeGreaterThan(0);
    await pollGeneration(api, account.key, created.json().id, (g) => g.status === 'succeeded');
    expect((await createGeneration(api, account.key, body, 'metrics-success')).statusCode).toBe(202);

    // A job that fails at the provider: failed with its code, refunded.
    const failing = await createGeneration(api, account.key, { model, prompt: 'a storm [sim:fail]' });
    expect(failing.statusCode).toBe(202);
    const failed = await pollGeneration(api, account.key, failing.json().id, (g) => g.credits_refunded);
    expect(failed.status).toBe('failed');

    // A submit whose answer is lost and that the provider cannot account for: review, not refunded.
    const lost = await createGeneration(api, account.key, { model, prompt: 'fog [sim:uncertain]' });
    await pollGeneration(api, account.key, lost.json().id, (g) => g.status === 'failed');

    // Refused by the API (validation) and by admission (more than the balance).
    const invalid = await createGeneration(api, account.key, { model, prompt: '' });
    expect(invalid.statusCode).toBe(400);
    const unknown = await createGeneration(api, account.key, { model: 'no-such-model', prompt: 'x' });
    expect(unknown.statusCode).toBe(400);
    const poor = await createPaidAccount(db.pool, { oneTime: 1 });
    for (let i = 0; i < 2; i++) {
      const tooDear = await createGeneration(api, poor.key, { model, prompt: 'x' }, 'metrics-poor');
      expect(tooDear.statusCode).toBe(402);
    }

    const [apiAfter, workerAfter] = [await scrape(apiMetrics), await scrape(workerMetrics)];
    const onWorker = delta(workerBefore, workerAfter);
    const onApi = delta(apiBefore, apiAfter);
    expect(onWorker(metricNames.generationsAdmitted, { model })).toBe(3);
    expect(onWorker(metricNames.creditsDebited, { model })).toBe(3 * price);
    expect(onWorker(metricNames.generationsSucceeded, { model })).toBe(1);
    expect(onWorker(metricNames.generationsFailed, { model, code: 'generation_failed' })).toBe(1);
    expect(onWorker(metricNames.generationsRefunded, { model })).toBe(1);
    expect(onWorker(metricNames.creditsRefunded, { model })).toBe(price);
    expect(onWorker(metricNames.generationsSentToReview, { model })).toBe(1);
    expect(onWorker(metricNames.generationsRejected, { model, code: 'insufficient_credits' })).toBe(1);
    expect(onApi(metricNames.generationsRejected, { model, code: 'invalid_request' })).toBe(1);
    expect(onApi(metricNames.generationsRejected, { model: 'unknown', code: 'invalid_request' })).toBe(1);
    // Every provider call is timed: three submits reached the simulated provider.
    expect(
      onWorker(`${metricNames.providerCallDuration}_count`, {
        provider: 'simulated',
        call: 'submit',
        outcome: 'ok',
      }),
    ).toBeGreaterThanOrEqual(2);
    expect(workerAfter.value(metricNames.providerCircuitOpen, { provider: 'simulated' })).toBe(0);
    expect(workerAfter.value(metricNames.generationsNeedingReview, { model })).toBe(1);
  });

  it('times requests by route pattern, never by a path with an id in it', async () => {
    const created = await createGeneration(api, account.key, { model, prompt: 'a quiet harbour' });
    const id = created.json().id as string;
    await pollGeneration(api, account.key, id);
    await api.app.inject({ url: '/v1/generations/gen_doesNotExist', headers: bearer(account.key) });
    const after = await scrape(apiMetrics);
    const http = after.samples.filter((s) => s.name === `${metricNames.httpRequestDuration}_count`);
    expect(
      http.find((s) => s.labels.route === '/v1/generations/:id' && s.labels.status === '200'),
    ).toBeTruthy();
    expect(
      http.find((s) => s.labels.route === '/v1/generations/:id' && s.labels.status === '404'),
    ).toBeTruthy();
    expect(
      http.find((s) => s.labels.route === '/v1/generations' && s.labels.method === 'POST')?.value,
    ).toBeGreaterThan(0);
    for (const sample of after.samples) expect(Object.values(sample.labels).join(' ')).not.toMatch(/gen_/);
  });

  it('reads what is queued too long and the provider circuits from PostgreSQL when scraped', async () => {
    const created = await createGeneration(api, account.key, { model, prompt: 'slow [sim:slow=30]' });
    expect(created.statusCode).toBe(202);
    const id = created.json().id as string;
    const queued = await scrape(workerMetrics);
    expect(queued.value(metricNames.generationsQueued, { model })).toBe(1);
    expect(queued.value(metricNames.generationsQueuedTooLong, { model })).toBe(0);
    // As if it had been created an hour ago (QUEUED_TOO_LONG_MS is a minute here).
    await db.pool.query(
      sql.unsafe`UPDATE generations SET created_at = now() - interval '1 hour' WHERE id = ${id}`,
    );
    await db.pool.query(sql.unsafe`
      INSERT INTO provider_health (provider, state, consecutive_failures, down_since, probe_at)
      VALUES ('simulated', 'down', 5, now(), now() + interval '1 hour')
      ON CONFLICT (provider) DO UPDATE SET state = 'down', consecutive_failures = 5, down_since = now(),
        probe_at = now() + interval '1 hour'`);
    const stuck = await scrape(workerMetrics);
    expect(stuck.value(metricNames.generationsQueuedTooLong, { model })).toBe(1);
    expect(stuck.value(metricNames.oldestQueuedAge, { model })).toBeGreaterThan(3590);
    expect(stuck.value(metricNames.providerCircuitOpen, { provider: 'simulated' })).toBe(1);
    expect(stuck.value(metricNames.providerConsecutiveFailures, { provider: 'simulated' })).toBe(5);
    await db.pool.query(sql.unsafe`DELETE FROM provider_health WHERE provider = 'simulated'`);
  });

  it("serves the Temporal SDK's own worker metrics on their port", async () => {
    const temporal = await scrape(temporalMetrics);
    for (const name of temporalSdkMetricNames) expect(temporal.families, name).toContain(name);
  });

  it('keeps the scrapes out of the request log, which still has the API calls', async () => {
    await scrape(apiMetrics);
    const logged = await waitFor(async () => {
      const rows = await db.pool.anyFirst(
        sql.type(z.object({ path: z.string() }))`SELECT path FROM api_request_log`,
      );
      return rows.some((p) => p.startsWith('/v1/generations')) && rows;
    });
    expect(logged.filter((p) => p.includes('metrics'))).toEqual([]);
    // The API's own port does not serve them.
    const onApiPort = await api.app.inject({ url: '/metrics' });
    expect(onApiPort.statusCode).toBe(401);
  });
});
