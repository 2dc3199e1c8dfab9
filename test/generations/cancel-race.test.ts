import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { parseCatalogFile } from '../../src/catalog/catalog-file.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import { randomBase62 } from '../../src/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { waitFor } from '../support/wait.js';
import { workerProcesses } from '../support/worker-process.js';

/**
 * Issue 27 §2: a client's cancel where the provider's state changes between our read and our
 * cancel, as the real services' can. The real API, the generation workflow and a real worker
 * process, against the protocol fakes. Whatever the provider bills, the cancel's answer and the
 * final generation say: a job it ran is charged (never refunded), one it never ran is refunded.
 */
describe('a cancel racing the provider picking the job up', () => {
  const taskQueue = `cancel-race-${randomBase62(8)}`;
  let fal: FalQueueServer;
  let replicate: ReplicateServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let storageDir: string;
  let worker: ChildProcess;

  const env = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '100',
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    ...fal.env(),
    ...replicate.env(),
  });
  const workers = workerProcesses(() => ({ ...env(), DATABASE_URL: db.url }));

  beforeAll(async () => {
    fal = await FalQueueServer.start({ key: `fal-key-${randomBase62(12)}` });
    replicate = await ReplicateServer.start({ token: `r8_${randomBase62(20)}` });
    db = await createTestDatabase();
    for (const name of ['fal', 'replicate']) {
      const file = `catalog/examples/${name}.json`;
      const text = await readFile(new URL(`../../${file}`, import.meta.url), 'utf8');
      await importCatalog(db.pool, file, parseCatalogFile(text, file));
    }
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'cancel-race-'));
    api = await startTestApi(db.url, env());
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
    worker = await workers.start();
  });
  afterAll(async () => {
    if (worker) workers.killAll();
    await api?.close();
    await db?.drop();
    await Promise.all([fal?.close(), replicate?.close()]);
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const create = async (body: Record<string, unknown>) => {
    const response = await createGeneration(api, account.key, body);
    expect(response.statusCode, response.body).toBe(202);
    return response.json<{ id: string; credits: number }>();
  };
  const cancel = (id: string) =>
    api.app.inject({ method: 'POST', url: `/v1/generations/${id}/cancel`, headers: bearer(account.key) });
  const balance = async () =>
    (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) })).json()
      .credits as number;
  const handedOver = (id: string) =>
    waitFor(
      () =>
        db.pool.maybeOneFirst(sql.type(z.object({ provider_job_id: z.string().nullable() }))`
          SELECT provider_job_id FROM generations WHERE id = ${id}`),
      30_000,
    );

  it('Replicate started it between our read and our cancel: 200 canceled, charged (Replicate bills the run)', async () => {
    const prompt = 'replicate picks it up as we cancel';
    replicate.script({ pollsStarting: 1_000_000 }, promptContains(prompt));
    const before = await balance();
    const { id, credits } = await create({ model: 'replicate-flux-schnell', prompt });
    await handedOver(id);
    const prediction = replicate.accepted().find((p) => p.input.prompt === prompt)!;
    replicate.beforeCancel = (predictionId) => {
      if (predictionId === prediction.id) replicate.startNow(predictionId);
    };
    let response;
    try {
      response = await cancel(id);
    } finally {
      replicate.beforeCancel = undefined;
    }
    // Replicate canceled it running: the answer says it is stopped, and that the credits stay spent.
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({
      id,
      status: 'failed',
      credits_refunded: false,
      output: null,
      error: { code: 'canceled', message: expect.stringContaining('not refunded') },
    });
    expect(replicate.accepted().find((p) => p.id === prediction.id)!.canceled).toBe(true);
    expect(replicate.statusOf(prediction.id)).toBe('canceled');
    // The wait saw its end; nothing refunds it later, and a second cancel says the same.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await balance()).toBe(before - credits);
    const again = await cancel(id);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(response.json());
  });

  it('a fal runner took it between our read and our cancel and ran it on: 409, delivered and charged once', async () => {
    const prompt = 'fal runner takes it as we cancel';
    fal.script({ pollsInQueue: 1_000_000, hold: true, ignoresCancel: true }, promptContains(prompt));
    const { id } = await create({ model: 'fal-flux-schnell', prompt });
    await handedOver(id);
    const request = fal.accepted().find((j) => j.input.prompt === prompt)!;
    fal.beforeCancel = (requestId) => {
      if (requestId === request.id) fal.pickUp(requestId);
    };
    let response;
    try {
      const answered = cancel(id);
      // fal answered CANCELLATION_REQUESTED, and its runner goes on to the end.
      await until(() => fal.accepted().find((j) => j.id === request.id)?.cancelIgnored);
      fal.release(request.id);
      response = await answered;
    } finally {
      fal.beforeCancel = undefined;
    }
    expect(response.statusCode, response.body).toBe(409);
    expect(response.json().error.code).toBe('not_cancelable');
    const done = await pollGeneration(api, account.key, id, undefined, 30_000);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false, error: null });
    expect(done.output.images).toHaveLength(1);
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a fal runner took it between our read and our cancel and stopped: no output (fal bills none), 200 refunded', async () => {
    const prompt = 'fal runner takes it and stops';
    fal.script({ pollsInQueue: 1_000_000, hold: true }, promptContains(prompt));
    const before = await balance();
    const { id } = await create({ model: 'fal-flux-schnell', prompt });
    await handedOver(id);
    const request = fal.accepted().find((j) => j.input.prompt === prompt)!;
    fal.beforeCancel = (requestId) => {
      if (requestId === request.id) fal.pickUp(requestId);
    };
    let response;
    try {
      response = await cancel(id);
    } finally {
      fal.beforeCancel = undefined;
    }
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({
      id,
      status: 'failed',
      credits_refunded: true,
      error: { code: 'canceled' },
    });
    expect(fal.accepted().find((j) => j.id === request.id)).toMatchObject({
      pickedUp: true,
      cancelled: true,
    });
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    expect(await balance()).toBe(before);
  });
});

/** Waits until a synchronous probe of the fakes' state holds (their state is in this process). */
const until = <T>(probe: () => T | null | false | undefined, timeoutMs?: number) =>
  waitFor(() => Promise.resolve(probe() || null), timeoutMs);
