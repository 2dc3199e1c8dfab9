import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { workflowIdOf } from '../support/ledger.js';

/** The same retention story on the dev server, with durations shortened by configuration. */
describe('expiry and the key horizon with short durations (dev server)', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiService;
  let account: TestAccount;
  let connection: Connection;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool);
    api = await startTestApi(db.url, {
      ...worker.apiEnv,
      RESULT_RETENTION_MS: '1500',
      IDEMPOTENCY_RETENTION_MS: '4000',
    });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    connection = await Connection.connect({ address: inject('temporalAddress') });
  });
  afterAll(async () => {
    await connection?.close();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('content expires, the key replays the expired generation, then after the horizon it starts a new one', async () => {
    const body = { model: 'lumen-lite', prompt: 'short-lived' };
    const first = await createGeneration(api, account.key, body, 'horizon-key');
    const id = first.json().id as string;
    const done = await pollGeneration(api, account.key, id);
    expect(done.status).toBe('succeeded');
    const url = done.output.images[0].url as string;
    expect((await fetch(url)).status).toBe(200);

    const expired = await pollGeneration(api, account.key, id, (g) => g.content_expired === true, 10_000);
    expect(expired).toMatchObject({ status: 'succeeded', input: null, output: null, credits: 2 });
    expect((await fetch(url)).status).toBe(404);
    const replay = await createGeneration(api, account.key, body, 'horizon-key');
    expect(replay.json()).toMatchObject({ id, content_expired: true });

    const handle = new Client({ connection }).workflow.getHandle(await workflowIdOf(db.pool, id));
    await handle.result();
    const fresh = await createGeneration(api, account.key, body, 'horizon-key');
    expect(fresh.statusCode).toBe(202);
    expect(fresh.json().id).not.toBe(id);
  }, 60_000);
});
