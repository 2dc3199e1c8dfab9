import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';

describe('Temporal unreachable', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let down: ApiService;
  let up: ApiService;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool);
    // Nothing listens on port 9 of loopback: this API's Temporal is down.
    down = await startTestApi(db.url, {
      ...worker.apiEnv,
      TEMPORAL_ADDRESS: '127.0.0.1:9',
      ADMISSION_TIMEOUT_MS: '1500',
    });
    up = await startTestApi(db.url, worker.apiEnv);
    account = await createPaidAccount(db.pool, { oneTime: 10 });
  });
  afterAll(async () => {
    await down?.close();
    await up?.close();
    await worker?.close();
    await db?.drop();
  });

  it('answers 503 in the envelope, charges nothing, and the same key and body work once it is back', async () => {
    const body = { model: 'lumen-lite', prompt: 'while Temporal is away' };
    const refused = await createGeneration(down, account.key, body, 'outage-retry');
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error).toMatchObject({
      code: 'service_unavailable',
      message: expect.stringContaining('same Idempotency-Key'),
    });
    // Reads keep working without Temporal.
    expect(
      (
        await down.app.inject({
          method: 'GET',
          url: '/v1/credits',
          headers: { authorization: `Bearer ${account.key}` },
        })
      ).json().credits,
    ).toBe(10);

    const retried = await createGeneration(up, account.key, body, 'outage-retry');
    expect(retried.statusCode).toBe(202);
    const id = retried.json().id as string;
    expect((await pollGeneration(up, account.key, id)).status).toBe('succeeded');
    expect(await chargesOf(db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
  });
});
