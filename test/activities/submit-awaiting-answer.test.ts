import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { ProviderRejection, type Provider } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { errorTypes } from '../../src/workflows/generation-types.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admittedStart, failureOf } from '../support/generations.js';

/**
 * A create the POST abandoned at its deadline is still on its way: a later attempt, on this worker or
 * another, must neither send it again nor take its silence for a lost answer (which, with a provider
 * that cannot be asked, means review) while its answer can still come.
 */
describe('a submit attempt while an earlier create awaits its answer', () => {
  let db: TestDatabase;
  let account: TestAccount;
  /** Like fal: creates answered when the test says, and no lookup by anything we sent. */
  const creates: Array<{ answer: (jobId: string) => void; refuse: (error: Error) => void }> = [];
  let lookups = 0;
  const provider: Provider = {
    submit: () =>
      new Promise((resolve, reject) =>
        creates.push({ answer: (jobId) => resolve({ jobId }), refuse: reject }),
      ),
    status: () => Promise.resolve({ state: 'running' }),
    fetchResult: () => Promise.reject(new Error('not used')),
    lookup: () => ((lookups += 1), Promise.resolve({ found: 'unknown' })),
    cancel: () => Promise.resolve(),
  };
  /** Two workers' activities on one database. */
  const worker = () =>
    createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage: new LocalStorage('/nonexistent', 'http://results.test'),
      concurrencyLimit: 10,
    });
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(() => db?.drop());

  const admitted = (prompt: string) => admittedStart(db.pool, account, prompt);

  it('waits (ProviderBusy) on another worker until the answer comes, then takes the recorded job', async () => {
    const start = await admitted('a slow create');
    const abandoned = worker().submit(start);
    await expect.poll(() => creates.length).toBe(1);
    const meanwhile = await failureOf(worker().submit(start));
    expect(meanwhile?.type).toBe(errorTypes.providerBusy);
    expect(lookups).toBe(0);

    creates[0]!.answer('job-late');
    expect(await abandoned).toEqual({ jobId: 'job-late', wait: expect.objectContaining({ push: false }) });
    expect(await worker().submit(start)).toEqual({
      jobId: 'job-late',
      wait: expect.objectContaining({ push: false }),
    });
    expect(creates).toHaveLength(1);
    expect(lookups).toBe(0);
  });

  it('a rejection heard by the abandoned attempt frees the claim: the next attempt sends again and hears it', async () => {
    const start = await admitted('a refused create');
    const abandoned = failureOf(worker().submit(start));
    await expect.poll(() => creates.length).toBe(2);
    expect((await failureOf(worker().submit(start)))?.type).toBe(errorTypes.providerBusy);

    creates[1]!.refuse(new ProviderRejection('prompt is required'));
    expect((await abandoned)?.type).toBe(errorTypes.providerRejection);
    const retried = failureOf(worker().submit(start));
    await expect.poll(() => creates.length).toBe(3);
    creates[2]!.refuse(new ProviderRejection('prompt is required'));
    expect((await retried)?.type).toBe(errorTypes.providerRejection);
    expect(lookups).toBe(0);
  });
});
