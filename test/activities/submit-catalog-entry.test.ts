import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { settleDebit } from '../../src/activities/debit.js';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { claimSubmit, recordSubmittedJob, submissionState } from '../../src/db/provider-submissions.js';
import { endRoute } from '../../src/db/route-attempts.js';
import type { Provider, ProviderJob } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';

/**
 * The handover builds the provider's job from the model's catalog entry as stored when it submits.
 * While that is the entry admission just quoted from, the worker reuses it instead of reading and
 * parsing the definition again; once the catalog changed, the stored definition is the one used.
 */
describe('the catalog entry a submission uses', () => {
  let db: TestDatabase;
  let account: TestAccount;
  /** The jobs the provider was handed (a stub: the provider is the party we do not own). */
  const jobs: ProviderJob[] = [];
  const provider: Provider = {
    submit: (job) => {
      jobs.push(job);
      return Promise.resolve({ jobId: `job-${jobs.length}` });
    },
    status: () => Promise.resolve({ state: 'running' }),
    fetchResult: () => Promise.reject(new Error('not used')),
    lookup: () => Promise.resolve({ found: false }),
    cancel: () => Promise.resolve(),
  };
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(() => db?.drop());

  const digestOf = (model: string) =>
    db.pool.oneFirst(sql.type(z.object({ digest: z.string() }))`
      SELECT md5(definition::text) AS digest FROM models WHERE id = ${model}`);
  const setLongEdge = (px: number) =>
    db.pool.query(sql.unsafe`
      UPDATE models SET definition = jsonb_set(definition, '{output_size,long_edge_px,basic}', ${String(px)}::jsonb)
      WHERE id = 'lumen-lite'`);

  it('a claim leaves out the definition whose digest the caller holds, and sends any other', async () => {
    const start = generationStart(account, 'a claimed harbour');
    expect((await settleDebit(db.pool, start, 10)).outcome).toBe('accepted');
    const digest = await digestOf('lumen-lite');
    const known = await claimSubmit(db.pool, start.generationId, 'att_one', digest, 60_000);
    expect(known).toMatchObject({ digest, definition: null, mine: true, sent: false });
    const other = await claimSubmit(db.pool, start.generationId, 'att_two', 'another digest', 60_000);
    expect(other).toMatchObject({ digest, mine: false, awaiting_answer: true });
    expect(other.definition).toMatchObject({ name: 'Lumen Lite' });
  });

  it('uses the entry admission quoted from, and the stored one once the catalog changed', async () => {
    const activities = createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage: new LocalStorage('/nonexistent', 'http://results.test'),
      concurrencyLimit: 10,
    });
    const first = generationStart(account, 'a quiet harbour');
    expect((await settleDebit(db.pool, first, 10)).outcome).toBe('accepted');
    await activities.submit(first);
    expect(jobs.at(-1)).toMatchObject({ token: `tok_${first.generationId}`, longEdgePx: 2048 });

    // Admitted from the entry this worker knows; the catalog changes before the handover.
    const second = generationStart(account, 'a busy harbour');
    expect((await settleDebit(db.pool, second, 10)).outcome).toBe('accepted');
    await setLongEdge(1536);
    try {
      await activities.submit(second);
      expect(jobs.at(-1)).toMatchObject({ token: `tok_${second.generationId}`, longEdgePx: 1536 });
    } finally {
      await setLongEdge(2048);
    }
  });

  it('a job is recorded only by the claim’s holder, on the route the claim is on (issue 35, item 5)', async () => {
    const start = generationStart(account, 'a late create');
    expect((await settleDebit(db.pool, start, 10)).outcome).toBe('accepted');
    const id = start.generationId;
    const fal = { position: 0, route: 0, provider: 'fal' };
    expect(await claimSubmit(db.pool, id, 'att_first', null, 60_000, 0)).toMatchObject({ mine: true });
    // Route 0 is left (its end recorded by the holder): a job its create still brings back is not recorded.
    expect(await endRoute(db.pool, id, 'att_first', { ...fal, reason: 'test: refused' })).toBe(true);
    expect(await recordSubmittedJob(db.pool, id, 'fal:late-job', fal, 'att_first')).toBe(false);
    expect((await submissionState(db.pool, id)).jobId).toBeNull();
    // Route 1, claimed by another attempt: only that attempt records its job.
    const replicate = { position: 1, route: 1, provider: 'replicate' };
    expect(await claimSubmit(db.pool, id, 'att_second', null, 60_000, 1)).toMatchObject({ mine: true });
    expect(await recordSubmittedJob(db.pool, id, 'replicate:stray', replicate, 'att_first')).toBe(false);
    expect(await recordSubmittedJob(db.pool, id, 'replicate:job', replicate, 'att_second')).toBe(true);
    expect((await submissionState(db.pool, id)).jobId).toBe('replicate:job');
  });
});
