import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { ProviderTransientError, type Provider } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { errorTypes } from '../../src/workflows/generation-types.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admittedStart, failureOf } from '../support/generations.js';

/**
 * Issue 27 §2's audit note: what a submit attempt does is fenced by its claim. An attempt whose
 * claim was taken over (its window lapsed: a worker that stalled or died) can neither have its
 * preparation count as a create that may have left, nor give back the in-flight place that the
 * create of the attempt holding the claim now runs under.
 */
describe('a submit attempt whose claim was taken over', () => {
  let db: TestDatabase;
  let account: TestAccount;
  /** Each call's preparation (reading reference images) and create, released when the test says. */
  let prepares: Array<() => void> = [];
  let sends: Array<{ answer: (jobId: string) => void; fail: (error: Error) => void }> = [];
  let holdPrepare = false;
  let holdSend = false;
  let lookupAnswer: Awaited<ReturnType<Provider['lookup']>> = { found: 'unknown' };
  let lookups = 0;
  const provider: Provider = {
    async prepare() {
      if (holdPrepare) await new Promise<void>((resolve) => prepares.push(resolve));
      return {
        send: () =>
          holdSend
            ? new Promise((resolve, reject) =>
                sends.push({ answer: (jobId) => resolve({ jobId }), fail: reject }),
              )
            : (sends.push({ answer: () => undefined, fail: () => undefined }),
              Promise.resolve({ jobId: `job-${sends.length}` })),
      };
    },
    async submit(job) {
      return (await this.prepare!(job)).send();
    },
    status: () => Promise.resolve({ state: 'running' }),
    fetchResult: () => Promise.reject(new Error('not used')),
    lookup: () => ((lookups += 1), Promise.resolve(lookupAnswer)),
    cancel: () => Promise.resolve(),
  };
  /** One worker's activities (several share the database), with an in-flight cap. */
  const worker = () =>
    createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage: new LocalStorage('/nonexistent', 'http://results.test'),
      concurrencyLimit: 10,
      inFlightCap: () => 5,
    });
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(() => db?.drop());

  const admitted = (prompt: string) => admittedStart(db.pool, account, prompt);
  const reset = (lookup: typeof lookupAnswer) => {
    prepares = [];
    sends = [];
    holdPrepare = false;
    holdSend = false;
    lookups = 0;
    lookupAnswer = lookup;
  };
  /** The holder stopped renewing (stalled, or its worker died): its window has lapsed. */
  const lapse = (generationId: string) =>
    db.pool.query(sql.unsafe`
      UPDATE generations SET submit_awaiting_until = now() - interval '1 second' WHERE id = ${generationId}`);
  const slotHeld = (generationId: string) =>
    db.pool.exists(sql.unsafe`SELECT 1 FROM provider_slots WHERE generation_id = ${generationId}`);
  const sentMark = (generationId: string) =>
    db.pool.oneFirst(sql.type(z.object({ sent: z.boolean() }))`
      SELECT submit_sent_at IS NOT NULL AS sent FROM generations WHERE id = ${generationId}`);

  it('taken over while preparing its images: it had sent nothing, so the next attempt sends (no review)', async () => {
    reset({ found: 'unknown' });
    const start = await admitted('slow reference images');
    holdPrepare = true;
    const stalled = failureOf(worker().submit(start));
    await expect.poll(() => prepares.length).toBe(1);
    // Preparing is not sending: nothing may count as a create that may have reached the provider.
    expect(await sentMark(start.generationId)).toBe(false);
    await lapse(start.generationId);

    holdPrepare = false;
    // A provider that cannot be asked (fal, Replicate) would send a "may have sent" to review.
    expect(await worker().submit(start)).toMatchObject({ jobId: 'job-1' });
    expect(lookups).toBe(0);

    // The stalled attempt finishes preparing: its claim is gone, so nothing leaves.
    prepares[0]!();
    expect((await stalled)?.type).toBe(errorTypes.providerBusy);
    expect(sends).toHaveLength(1);
    expect(await slotHeld(start.generationId)).toBe(true);
  });

  it('its create failing late leaves the in-flight place of the create the current holder sent', async () => {
    // A provider that can say it has no job for our token: the next attempt may send again.
    reset({ found: false });
    const start = await admitted('a late failing create');
    holdSend = true;
    const stale = failureOf(worker().submit(start));
    await expect.poll(() => sends.length).toBe(1);
    await lapse(start.generationId);

    holdSend = false;
    expect(await worker().submit(start)).toMatchObject({ jobId: 'job-2' });
    expect(lookups).toBe(1);
    expect(await slotHeld(start.generationId)).toBe(true);

    // The stale create's answer comes at last: a 503, so the provider created nothing for it.
    sends[0]!.fail(new ProviderTransientError('replicate answered HTTP 503'));
    expect(await stale).not.toBeNull();
    // The place stays with the generation, whose job (job-2) the provider runs.
    expect(await slotHeld(start.generationId)).toBe(true);
  });
});
