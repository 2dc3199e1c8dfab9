import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import type { Provider } from '../../src/providers/provider.js';
import { SimulatedProvider } from '../../src/providers/simulated-provider.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';

/**
 * POST hands the job to the provider before answering, but never waits on a provider that does
 * not answer: after two attempts of PROVIDER_SUBMIT_TIMEOUT_MS it answers queued, and submission
 * goes on in the background.
 */
describe('a provider too slow to accept within the POST', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiService;
  let account: TestAccount;
  let connection: Connection;
  let client: Client;
  // The provider's first two submits hang (their requests never arrive) until the test lets them fail.
  let releaseHungSubmits!: () => void;
  const hung = new Promise<void>((resolve) => (releaseHungSubmits = resolve));
  let submitCalls = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    const simulated = new SimulatedProvider(db.pool, { delayMs: 100 });
    const unresponsive: Provider = {
      submit: async (job) => {
        if (++submitCalls <= 2) {
          await hung;
          throw new Error('connection reset before the request was sent');
        }
        return simulated.submit(job);
      },
      status: (jobId) => simulated.status(jobId),
      fetchResult: (jobId, index) => simulated.fetchResult(jobId, index),
      lookup: (token) => simulated.lookup(token),
    };
    worker = await startTestWorker(db.pool, { overrides: { providerFor: () => unresponsive } });
    api = await startTestApi(db.url, { ...worker.apiEnv, PROVIDER_SUBMIT_TIMEOUT_MS: '300' });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });
  });
  afterAll(async () => {
    releaseHungSubmits();
    await connection?.close();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('answers 202 queued while the provider is silent, then submits once in the background and succeeds', async () => {
    const response = await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'patience' });
    expect(response.statusCode).toBe(202);
    const created = response.json();
    expect(created).toMatchObject({ status: 'queued', credits: 2, credits_refunded: false });
    expect(submitCalls).toBeGreaterThanOrEqual(2); // both attempts inside the POST were made, and hang still

    expect(await pollGeneration(api, account.key, created.id)).toMatchObject({ status: 'succeeded' });
    expect(await chargesOf(db.pool, created.id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    const history = await client.workflow.getHandle(await workflowIdOf(db.pool, created.id)).fetchHistory();
    const scheduled = history.events!.flatMap((e) => {
      const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
      return name ? [name] : [];
    });
    // The background submission is an activity of its own (the ones inside the POST are local markers).
    expect(scheduled).toEqual(['submit', 'waitForProvider', 'persistResults']);
  });
});
