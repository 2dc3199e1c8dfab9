import { rm } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { startTcpRelay, type TcpRelay } from '../support/tcp-relay.js';
import { workerProcesses } from '../support/worker-process.js';

/** The worker process as an orchestrator runs it: started before its dependencies, stopped with SIGTERM. */
describe('the worker process at start and at stop', () => {
  const taskQueue = `start-stop-${randomBase62(8)}`;
  const storageDir = `/tmp/start-stop-results-${taskQueue}`;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let client: Client;
  const relays: TcpRelay[] = [];
  const baseEnv = () => ({
    DATABASE_URL: db.url,
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '200',
    LOG_LEVEL: 'info',
  });

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, {
      TEMPORAL_TASK_QUEUE: taskQueue,
      PROVIDER_POLL_INTERVAL_MS: '200',
      // A worker process that has just started takes its first workflow task slowly on a busy machine.
      ADMISSION_TIMEOUT_MS: '30000',
    });
    account = await createPaidAccount(db.pool, { oneTime: 20 });
    client = new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
  });
  afterAll(async () => {
    for (const relay of relays) await relay.close();
    await client?.connection.close();
    await api?.close();
    await db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  it('waits for PostgreSQL and Temporal with backoff, saying so, then runs', async () => {
    const [pgPort, temporalPort] = [await freePort(), await freePort()];
    const realDatabase = new URL(db.url);
    const databaseUrl = new URL(db.url);
    databaseUrl.port = String(pgPort);
    const workers = workerProcesses(() => ({
      ...baseEnv(),
      // Nothing listens on either port yet: both dependencies are "still starting".
      DATABASE_URL: databaseUrl.toString(),
      TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}`,
    }));
    try {
      const ready = workers.start();
      ready.catch(() => undefined); // awaited below; a failure before then is the assertion's to report
      // A worker process starting on a loaded machine (Node, the bundle) can take its time to say so.
      await expect
        .poll(() => workers.logs(), { timeout: 45_000 })
        .toMatch(
          /waiting for PostgreSQL at 127\.0\.0\.1:\d+\/test_\w+: connect ECONNREFUSED.*next attempt in/,
        );
      await expect
        .poll(() => workers.logs(), { timeout: 20_000 })
        .toMatch(/waiting for Temporal at 127\.0\.0\.1:\d+/);
      const [temporalHost, temporalRealPort] = inject('temporalAddress').split(':');
      relays.push(
        await startTcpRelay({ host: realDatabase.hostname, port: Number(realDatabase.port) }, pgPort),
        await startTcpRelay({ host: temporalHost!, port: Number(temporalRealPort) }, temporalPort),
      );
      await ready;
      expect(workers.logs()).toMatch(/PostgreSQL answers at 127\.0\.0\.1:\d+/);
      expect(workers.logs()).toMatch(/Temporal answers at 127\.0\.0\.1:\d+/);
      // Retries grow: the pauses between attempts are not all the first one.
      const pauses = [...workers.logs().matchAll(/"dependency":"PostgreSQL".*?"retryInMs":(\d+)/g)].map((m) =>
        Number(m[1]),
      );
      expect(pauses.slice(0, 2)).toEqual([500, 1000]);
      expect(realDatabase.password.length).toBeGreaterThan(0);
      expect(workers.logs()).not.toContain(realDatabase.password);
    } finally {
      workers.killAll();
      // Temporal must see the killed worker's polls end, or it hands the next test's tasks to them.
      for (const relay of relays.splice(0)) await relay.close();
    }
  }, 90_000);

  it('on SIGTERM with a job at the provider: nothing of it runs on the worker, which exits 0; another worker ends the generation (by its fallback read, when the push went with the stopped worker)', async () => {
    const workers = workerProcesses(() => ({
      ...baseEnv(),
      SIM_PROVIDER_DELAY_MS: '3000',
      WORKER_SHUTDOWN_GRACE_MS: '20000',
      PROVIDER_FALLBACK_READ_INTERVAL_MS: '1000',
    }));
    const first = await workers.start();
    const response = await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'stop gently' });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json().id as string;
    const handle = client.workflow.getHandle(await workflowIdOf(db.pool, id));
    // At the provider: the generation waits in its workflow, with no activity pending.
    const generating = async () => {
      const description = await handle.describe();
      return (
        (await pollGeneration(api, account.key, id, () => true)).status === 'queued' &&
        (await db.pool.exists(
          sql.type(
            z.object({ token: z.string() }),
          )`SELECT token FROM sim_provider_jobs WHERE token = ${`tok_${id}`}`,
        )) &&
        (description.raw.pendingActivities ?? []).length === 0
      );
    };
    await expect.poll(generating, { timeout: 15_000 }).toBe(true);

    const exited = new Promise<number | null>((resolve) => first.once('exit', (code) => resolve(code)));
    first.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(workers.logs()).toContain('shutting down: polling stopped');
    expect(workers.logs()).toContain('worker stopped');

    await workers.start();
    expect((await pollGeneration(api, account.key, id)).status).toBe('succeeded');
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0, submissions: 1 });
    workers.killAll();
  }, 60_000);
});
