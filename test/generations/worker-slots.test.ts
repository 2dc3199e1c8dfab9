import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';

/** Provider waits last as long as the provider works; they must never hold the slots other steps need. */
describe('worker slots', () => {
  const shortSlots = 2;
  const started = proto.temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiService;
  let account: TestAccount;
  let connection: Connection;
  let client: Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool, { maxConcurrentActivities: shortSlots });
    api = await startTestApi(db.url, worker.apiEnv);
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });
  });
  afterAll(async () => {
    await connection?.close();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('more slow jobs at the provider than short-activity slots: every one waits, and a new generation still completes', async () => {
    const slow = await Promise.all(
      Array.from({ length: shortSlots + 1 }, async (_, i) => {
        const response = await createGeneration(api, account.key, {
          model: 'lumen-lite',
          prompt: `a long exposure ${i} [sim:slow=120]`,
        });
        expect(response.statusCode).toBe(202);
        return response.json().id as string;
      }),
    );
    // Each slow generation's provider wait is running (it holds a worker slot, on the waits' queue).
    for (const id of slow) {
      const handle = client.workflow.getHandle(await workflowIdOf(db.pool, id));
      await expect
        .poll(
          async () =>
            (await handle.describe()).raw.pendingActivities?.map((a) => [a.activityType?.name, a.state]),
          { timeout: 15_000, interval: 100 },
        )
        .toEqual([['waitForProvider', started]]);
    }

    const response = await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'a snapshot' });
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    expect(await pollGeneration(api, account.key, id)).toMatchObject({ status: 'succeeded' });
    expect(await chargesOf(db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
  });
});
