import { readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { parseCatalogFile } from '../../src/catalog/catalog-file.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { runAdminCli } from '../support/admin.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { OpenAiImagesServer } from '../support/providers/openai-images-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { waitFor } from '../support/wait.js';
import { workerProcesses, type WorkerProcesses } from '../support/worker-process.js';

/** A real provider's fake, as far as an outage is concerned. */
interface Outageable {
  env(): Record<string, string>;
  creates: number;
  goDown(): Promise<void>;
  goUp(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Each real provider going away (its port refuses connections) and coming back, through the real
 * worker process (its health tracking and probes, configured by environment), the API and the
 * workflow: generations admitted before it was taken for down ride the outage out; new ones are
 * refused before the debit with 503 and Retry-After; a probe finds it up and POSTs are taken again.
 */
describe.each([
  {
    provider: 'fal',
    start: (): Promise<Outageable> => FalQueueServer.start(),
    catalog: 'fal.json',
    model: 'fal-flux-schnell',
  },
  {
    provider: 'replicate',
    start: (): Promise<Outageable> => ReplicateServer.start(),
    catalog: 'replicate.json',
    model: 'replicate-flux-schnell',
  },
  {
    provider: 'openai',
    start: (): Promise<Outageable> => OpenAiImagesServer.start(),
    catalog: 'openai.json',
    model: 'openai-gpt-image-1-mini',
  },
])('$provider down and back', ({ provider, start, catalog, model }) => {
  let fake: Outageable;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let storageDir: string;
  let workers: WorkerProcesses;
  const taskQueue = `down-${randomBase62(8)}`;
  const serviceEnv = () => ({
    ...fake.env(),
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '100',
    PROVIDER_DOWN_AFTER_FAILURES: '3',
    PROVIDER_PROBE_INTERVAL_MS: '1000',
    CATALOG_REFRESH_MS: '500',
  });

  beforeAll(async () => {
    fake = await start();
    db = await createTestDatabase();
    const file = path.join('catalog/examples', catalog);
    await importCatalog(db.pool, file, parseCatalogFile(await readFile(file, 'utf8'), file));
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'down-results-'));
    api = await startTestApi(db.url, serviceEnv());
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
    workers = workerProcesses(() => ({
      ...serviceEnv(),
      DATABASE_URL: db.url,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      LOG_LEVEL: 'info',
    }));
    await workers.start();
  });
  afterAll(async () => {
    workers?.killAll();
    await api?.close();
    await fake?.close();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const state = () =>
    db.pool.maybeOneFirst(sql.type(z.object({ state: z.string() }))`
      SELECT state FROM provider_health WHERE provider = ${provider}`);
  const credits = async () =>
    (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) })).json()
      .credits as number;

  it('rides the outage out, refuses new work before the debit while down, and takes it again once probed up', async () => {
    await fake.goDown();
    const early = await createGeneration(api, account.key, { model, prompt: 'before anyone noticed' });
    expect(early.statusCode, early.body).toBe(202);
    expect(early.json().status).toBe('queued');
    await waitFor(async () => (await state()) === 'down', 30_000);
    // The API learns it by NOTIFY, a moment after the row changed.
    await waitFor(() => Promise.resolve(api.providers.retryAfterSeconds(provider) !== null), 5_000);

    const before = await credits();
    const refused = await createGeneration(
      api,
      account.key,
      { model, prompt: 'while down' },
      `down-${provider}`,
    );
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error.code).toBe('service_unavailable');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await credits()).toBe(before);
    const report = await runAdminCli(['providers'], db.url);
    expect(report.stdout).toContain(`${provider}  down`);
    await waitFor(() => Promise.resolve(workers.logs().includes(`provider ${provider} is down`)), 10_000);

    await fake.goUp();
    await waitFor(async () => (await state()) === 'up', 30_000);
    await waitFor(() => Promise.resolve(api.providers.retryAfterSeconds(provider) === null), 5_000);
    // The worker writes the line just after the state (its log reaches us through a pipe).
    await waitFor(() => Promise.resolve(workers.logs().includes(`provider ${provider} is up again`)), 10_000);
    const retried = await createGeneration(
      api,
      account.key,
      { model, prompt: 'while down' },
      `down-${provider}`,
    );
    expect(retried.statusCode, retried.body).toBe(202);
    const [first, second] = await Promise.all(
      [early.json().id as string, retried.json().id as string].map((id) =>
        pollGeneration(api, account.key, id, undefined, 60_000),
      ),
    );
    expect(first).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(second).toMatchObject({ status: 'succeeded', credits_refunded: false });
    // One create each: nothing was sent twice through the outage.
    expect(fake.creates).toBe(2);
  }, 120_000);
});
