import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, expect } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from './api.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { importExampleCatalog } from './example-catalog.js';
import { createGeneration } from './generations.js';
import { FalQueueServer } from './providers/fal-queue-server.js';
import { OpenAiImagesServer } from './providers/openai-images-server.js';
import { ReplicateServer } from './providers/replicate-server.js';
import { waitFor } from './wait.js';
import { workerProcesses } from './worker-process.js';

/**
 * What the cancel tests share: the protocol fakes of fal and Replicate (and OpenAI when asked), their
 * example catalogs, the real API and a real worker process (`npm run worker`), a paid account, and
 * the client's calls. Registers its beforeAll and afterAll; read the fields inside tests.
 */
export function useCancelStack(name: string, options: { openai?: boolean } = {}) {
  const taskQueue = `${name}-${randomBase62(8)}`;
  const stack = {} as {
    fal: FalQueueServer;
    replicate: ReplicateServer;
    openai: OpenAiImagesServer | undefined;
    db: TestDatabase;
    api: ApiService;
    account: TestAccount;
  };
  let storageDir: string | undefined;
  let worker: ChildProcess | undefined;
  const env = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir!,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '100',
    // The fakes and their files are on 127.0.0.1, which outbound fetches refuse unless allowed.
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    ...stack.fal.env(),
    ...stack.replicate.env(),
    ...stack.openai?.env(),
  });
  const workers = workerProcesses(() => ({ ...env(), DATABASE_URL: stack.db.url }));

  beforeAll(async () => {
    stack.fal = await FalQueueServer.start({ key: `fal-key-${randomBase62(12)}` });
    stack.replicate = await ReplicateServer.start({ token: `r8_${randomBase62(20)}` });
    if (options.openai) stack.openai = await OpenAiImagesServer.start({ key: `sk-proj-${randomBase62(30)}` });
    stack.db = await createTestDatabase();
    for (const catalog of ['fal', 'replicate', ...(options.openai ? ['openai'] : [])])
      await importExampleCatalog(stack.db.pool, catalog);
    storageDir = await mkdtemp(path.join(os.tmpdir(), `${name}-`));
    stack.api = await startTestApi(stack.db.url, env());
    stack.account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    worker = await workers.start();
  });
  afterAll(async () => {
    if (worker) workers.killAll();
    await stack.api?.close();
    await stack.db?.drop();
    await Promise.all([stack.fal?.close(), stack.replicate?.close(), stack.openai?.close()]);
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  /** POST /v1/generations, expected 202: the generation's id and price. */
  const create = async (body: Record<string, unknown>) => {
    const response = await createGeneration(stack.api, stack.account.key, body);
    expect(response.statusCode, response.body).toBe(202);
    return response.json<{ id: string; credits: number }>();
  };
  const cancel = (id: string) =>
    stack.api.app.inject({
      method: 'POST',
      url: `/v1/generations/${id}/cancel`,
      headers: bearer(stack.account.key),
    });
  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;
  /** The provider's job id once the workflow has handed the job over (`fal:…`, `replicate:…`). */
  const handedOver = (id: string) =>
    waitFor(
      () =>
        stack.db.pool.maybeOneFirst(sql.type(z.object({ provider_job_id: z.string().nullable() }))`
          SELECT provider_job_id FROM generations WHERE id = ${id}`),
      30_000,
    );
  /** Kills the worker process (SIGKILL) and waits for it to exit. */
  const killWorker = async () => {
    const exited = new Promise((resolve) => worker!.once('exit', resolve));
    worker!.kill('SIGKILL');
    await exited;
  };
  const restartWorker = async () => {
    worker = await workers.start();
  };
  return { stack, create, cancel, balance, handedOver, killWorker, restartWorker };
}

/** Waits until a synchronous probe of the fakes' state holds (their state is in this process). */
export const until = <T>(probe: () => T | null | false | undefined, timeoutMs?: number) =>
  waitFor(() => Promise.resolve(probe() || null), timeoutMs);
