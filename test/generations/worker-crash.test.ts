import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'slonik';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
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
    // The crashed worker takes its push of the job's end with it: the fallback read finds the end.
    PROVIDER_FALLBACK_READ_INTERVAL_MS: '1000',
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
    // Wait until the provider has the job (this worker would push its end), then kill the worker outright.
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
