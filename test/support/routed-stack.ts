import type { ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { routeAttemptsOf } from '../../src/db/route-attempts.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from './api.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { importExampleCatalog } from './example-catalog.js';
import { createGeneration, pollGeneration } from './generations.js';
import { FalQueueServer } from './providers/fal-queue-server.js';
import { ReplicateServer } from './providers/replicate-server.js';
import { startTcpRelay, type TcpRelay, type TcpRelayOptions } from './tcp-relay.js';
import { workerProcesses, type WorkerProcesses } from './worker-process.js';

/**
 * Issue 29's stack: `flux-schnell` of catalog/examples/routed.json (fal first, Replicate second),
 * the real API and a real worker process, the fal queue and Replicate stand-ins, and the reads
 * the routing tests make. Call inside a describe: it registers its own beforeAll and afterAll.
 */
export function useRoutedStack(
  options: {
    workerEnv?: () => Record<string, string>;
    /** The worker reaches fal through a TCP relay (`stack.falRelay`) that cuts connections as this says. */
    falRelay?: TcpRelayOptions;
  } = {},
) {
  const taskQueue = `routed-${randomBase62(8)}`;
  const stack = {} as {
    fal: FalQueueServer;
    replicate: ReplicateServer;
    db: TestDatabase;
    api: ApiService;
    account: TestAccount;
    workers: WorkerProcesses;
    worker: ChildProcess;
    falRelay?: TcpRelay;
  };
  let storageDir = '';
  const apiEnv = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '50',
    // Tests here post 20 at once; on two loaded cores an admission can outlast the default 10 s,
    // and none of them is about that 503.
    ADMISSION_TIMEOUT_MS: '30000',
    ...stack.fal.env(),
    ...stack.replicate.env(),
  });
  stack.workers = workerProcesses(() => ({
    ...apiEnv(),
    DATABASE_URL: stack.db.url,
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    // The faults here are each test's own: none may take a provider down but the breaker test's.
    PROVIDER_DOWN_AFTER_FAILURES: '1000',
    LOG_LEVEL: 'warn',
    ...(stack.falRelay ? { FAL_QUEUE_URL: `http://127.0.0.1:${stack.falRelay.port}` } : {}),
    ...options.workerEnv?.(),
  }));

  beforeAll(async () => {
    stack.fal = await FalQueueServer.start();
    if (options.falRelay)
      stack.falRelay = await startTcpRelay(
        { host: '127.0.0.1', port: Number(new URL(stack.fal.env().FAL_QUEUE_URL!).port) },
        0,
        options.falRelay,
      );
    stack.replicate = await ReplicateServer.start();
    stack.db = await createTestDatabase();
    await importExampleCatalog(stack.db.pool, 'routed');
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'routed-'));
    await chmod(storageDir, 0o755);
    stack.api = await startTestApi(stack.db.url, apiEnv());
    stack.account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    stack.worker = await stack.workers.start();
  });
  afterAll(async () => {
    stack.workers.killAll();
    await stack.api?.close();
    await stack.falRelay?.close();
    await stack.fal?.close();
    await stack.replicate?.close();
    await stack.db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });
  beforeEach(() => {
    if (stack.fal) stack.fal.beforeCreateAnswer = undefined;
  });

  const post = (body: Record<string, unknown>, key?: string) =>
    createGeneration(stack.api, stack.account.key, { model: 'flux-schnell', ...body }, key);
  return {
    stack,
    /** The API's settings (task queue, storage, the stand-ins' addresses): a console on this stack takes them too. */
    apiEnv,
    post,
    /** POST → 202, its generation. */
    accepted: async (body: Record<string, unknown>) => {
      const response = await post(body);
      expect(response.statusCode, response.body).toBe(202);
      return response.json<Record<string, any>>();
    },
    /** The generation once it is no longer queued. */
    settled: (id: string) =>
      pollGeneration(stack.api, stack.account.key, id, (g) => g.status !== 'queued', 30_000),
    /** Creates that reached the stand-in with this prompt (accepted or not). */
    created: (server: FalQueueServer | ReplicateServer, prompt: string) =>
      server.accepted().filter((job) => String(job.input.prompt).includes(prompt)).length,
    /** The generation's route attempts, as [provider, outcome]. */
    attempts: async (id: string) =>
      (await routeAttemptsOf(stack.db.pool, id)).map((a) => [a.provider, a.outcome]),
    balance: async () =>
      (
        await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
      ).json().credits as number,
  };
}
