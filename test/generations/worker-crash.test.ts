import { rm } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { sql } from 'slonik';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/ids.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';
import { crash, workerProcesses } from '../support/worker-process.js';

/** The real worker process (`npm run worker`), killed with SIGKILL mid-generation and started again. */
describe('a worker killed mid-generation', () => {
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  const taskQueue = `crash-${randomBase62(8)}`;
  const storageDir = `/tmp/crash-results-${taskQueue}`;
  // The tests' deployment and bundle come with workerProcesses (the default deployment name may
  // hold another build's version made current by another test file).
  const workers = workerProcesses(() => ({
    DATABASE_URL: db.url,
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    SIM_PROVIDER_DELAY_MS: '4000',
    LOG_LEVEL: 'warn',
  }));

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { TEMPORAL_TASK_QUEUE: taskQueue, PROVIDER_POLL_INTERVAL_MS: '100' });
    account = await createPaidAccount(db.pool, { oneTime: 20 });
  });
  afterAll(async () => {
    workers.killAll();
    await rm(storageDir, { recursive: true, force: true });
    await api?.close();
    await db?.drop();
  });

  it('gives one debit, one provider submission and a succeeded generation after a restart', async () => {
    const first = await workers.start();
    const response = await createGeneration(
      api,
      account.key,
      { model: 'lumen-lite', prompt: 'survive the crash' },
      `crash-${taskQueue}`,
    );
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    // Wait until the provider has the job (the worker is now polling it), then kill the worker outright.
    await expect
      .poll(
        () =>
          db.pool.exists(
            sql.type(
              z.object({ token: z.string() }),
            )`SELECT token FROM sim_provider_jobs WHERE token = ${`tok_${id}`}`,
          ),
        { timeout: 10_000 },
      )
      .toBe(true);
    await crash(first);

    // A retry of the POST while no worker runs: same generation, no second debit.
    const retry = await createGeneration(
      api,
      account.key,
      { model: 'lumen-lite', prompt: 'survive the crash' },
      `crash-${taskQueue}`,
    );
    expect(retry.json().id).toBe(id);

    await workers.start();
    const done = await pollGeneration(api, account.key, id, (g) => g.status !== 'queued', 90_000);
    expect(done.status).toBe('succeeded');
    expect(await chargesOf(db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    expect(
      (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) })).json()
        .credits,
    ).toBe(18);
  }, 150_000);
});

/** Noticing a lost worker is the provider wait's heartbeat timeout; it must outlast the pause between polls. */
describe('the provider wait with a slow poll interval', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiService;
  let temporal: Connection;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool, { simDelayMs: 60_000 });
    api = await startTestApi(db.url, { ...worker.apiEnv, PROVIDER_POLL_INTERVAL_MS: '20000' });
    temporal = await Connection.connect({ address: inject('temporalAddress') });
  });
  afterAll(async () => {
    await temporal?.close();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('gets a heartbeat timeout of three poll intervals, so a healthy wait is never timed out between polls', async () => {
    const account = await createPaidAccount(db.pool, { oneTime: 5 });
    const response = await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'patience' });
    expect(response.statusCode).toBe(202);
    const workflowId = await db.pool.oneFirst(
      sql.type(z.object({ workflow_id: z.string() }))`
        SELECT workflow_id FROM generations WHERE id = ${response.json().id as string}`,
    );
    const handle = new Client({ connection: temporal }).workflow.getHandle(workflowId);
    const waitScheduled = async () =>
      (await handle.fetchHistory()).events?.find(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'waitForProvider',
      )?.activityTaskScheduledEventAttributes;
    await expect.poll(waitScheduled, { timeout: 10_000 }).toBeDefined();
    expect(Number((await waitScheduled())!.heartbeatTimeout?.seconds)).toBe(60);
  });
});
