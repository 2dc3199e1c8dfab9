import { mkdtemp, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { refundGeneration } from '../../src/db/credits-repository.js';
import { ProviderResultGone, type Provider } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { classifyFailure } from '../../src/activities/failures.js';
import { errorTypes } from '../../src/workflows/generation-types.js';
import { generationErrors } from '../../src/workflows/generation-errors.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { admittedStart, failureOf } from '../support/generations.js';
import { chargesOf, galleryOf } from '../support/ledger.js';
import { pngClaiming } from '../support/test-servers.js';

/**
 * Money and state at the edges of a generation's activities (issue 19): a submit answered late
 * never hides a generation in review; a delivered result is never refunded; a generation that
 * ended without success keeps no files; and only bytes that are not media fail a result for good.
 */
describe('the ledger at the edges', () => {
  let db: TestDatabase;
  let account: TestAccount;
  let folder: string;
  let storage: LocalStorage;
  /** Like Replicate: creates answered when the test says, and no lookup by anything we sent. */
  const creates: Array<{ answer: (jobId: string) => void }> = [];
  let fetchResult: Provider['fetchResult'] = () => Promise.reject(new Error('not used'));
  const provider: Provider = {
    submit: () => new Promise((resolve) => creates.push({ answer: (jobId) => resolve({ jobId }) })),
    status: () => Promise.resolve({ state: 'running' }),
    fetchResult: (...args) => fetchResult(...args),
    lookup: () => Promise.resolve({ found: 'unknown' }),
    cancel: () => Promise.resolve(),
  };
  const activities = () =>
    createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage,
      concurrencyLimit: 10,
    });
  const admitted = (prompt: string, inputPrefix: string | null = null) =>
    admittedStart(db.pool, account, prompt, { inputPrefix });
  const rowOf = (id: string) =>
    db.pool.one(
      sql.type(
        z.object({
          status: z.string(),
          needs_review: z.boolean(),
          credits_refunded: z.boolean(),
          provider_job_id: z.string().nullable(),
          content_expired: z.boolean(),
          input: z.unknown(),
        }),
      )`SELECT status, needs_review, credits_refunded, provider_job_id, content_expired, input FROM generations WHERE id = ${id}`,
    );
  /** persistResults in the SDK's activity context, as the worker runs it. */
  const persist = (generationId: string) => {
    const run = (...args: Parameters<ReturnType<typeof activities>['persistResults']>) =>
      activities().persistResults(...args);
    return new MockActivityEnvironment().run<
      Parameters<typeof run>,
      Awaited<ReturnType<typeof run>>,
      typeof run
    >(
      run,
      {
        generationId,
        model: 'lumen-lite',
        jobId: 'simulated:job-1',
        results: [{ width: 0, height: 0, contentType: 'image/png', url: 'https://provider.test/out.png' }],
      },
      60_000,
    );
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    folder = await mkdtemp(path.join(os.tmpdir(), 'ledger-edges-'));
    storage = new LocalStorage(folder, 'http://results.test');
  });
  afterAll(async () => {
    await db?.drop();
    await rm(folder, { recursive: true, force: true });
  });

  it('a late answer to an abandoned create records the job but leaves the generation in review', async () => {
    const start = await admitted('an answer that comes too late');
    const abandoned = activities().submit(start);
    await expect.poll(() => creates.length).toBe(1);
    // Meanwhile a later attempt heard "unknown" from the provider and the workflow sent it to review.
    await activities().markNeedsReview(start.generationId, generationErrors.submissionUnresolved);
    creates[0]!.answer('job-late');
    await abandoned.catch(() => undefined);
    expect(await rowOf(start.generationId)).toMatchObject({
      status: 'failed',
      needs_review: true,
      provider_job_id: expect.stringContaining('job-late'),
    });
  });

  it('a persist re-run after the generation completed stops there: no download, no refund', async () => {
    const start = await admitted('delivered once');
    fetchResult = () => Promise.resolve({ bytes: pngClaiming(64, 48), contentType: 'image/png' });
    const first = await persist(start.generationId);
    expect(first.outputs).toHaveLength(1);
    // The worker died before reporting; by the retry, the provider's URL has expired.
    fetchResult = () => Promise.reject(new ProviderResultGone('the result is no longer served'));
    const again = await persist(start.generationId);
    expect(again).toEqual(first);
    expect(await rowOf(start.generationId)).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await galleryOf(db.pool, start.generationId)).toHaveLength(1);
  });

  it('a succeeded generation is never refunded, by the repository or by SQL written around it', async () => {
    const start = await admitted('delivered and kept');
    fetchResult = () => Promise.resolve({ bytes: pngClaiming(64, 48), contentType: 'image/png' });
    await persist(start.generationId);
    await activities().refund(start.generationId, generationErrors.timedOut('late'));
    expect(await rowOf(start.generationId)).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 1, refunds: 0 });
    await expect(
      db.pool.query(sql.unsafe`UPDATE generations SET status = 'failed' WHERE id = ${start.generationId}`),
    ).rejects.toThrow(/check integrity constraint/);
    await expect(
      refundGeneration(db.pool, start.generationId, generationErrors.interrupted),
    ).resolves.toEqual({ changed: false });
  });

  it('a generation that ended charged (a cancel stopped a job the provider had started) is never refunded or requeued later', async () => {
    const start = await admitted('canceled while it ran');
    await activities().recordProviderJob(start.generationId, 'simulated:job-ran');
    await activities().endCharged(start.generationId, generationErrors.canceledWhileRunning);
    // A support reset re-runs the story, which no longer knows a cancel was asked: the job's end
    // then reads as a provider failure, and the refund step and support's resume come round again.
    await activities().refund(start.generationId, generationErrors.providerFailed('canceled'));
    await activities().recordProviderJob(start.generationId, 'simulated:job-other');
    expect(await rowOf(start.generationId)).toMatchObject({
      status: 'failed',
      needs_review: false,
      credits_refunded: false,
    });
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 1, refunds: 0 });
    // Sent to review instead, support may still refund it: review is the one way back.
    await activities().markNeedsReview(start.generationId, generationErrors.submissionUnresolved);
    await activities().refund(start.generationId, generationErrors.refundedBySupport);
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 1, refunds: 1 });
  });

  it('a result this worker could not measure (no room for the file) is retried; bytes that are not media fail for good', async () => {
    const start = await admitted('unmeasurable for now');
    const typeOf = async () =>
      (classifyFailure(await failureOf(persist(start.generationId))) as ApplicationFailure).type;
    fetchResult = () => Promise.resolve({ bytes: Buffer.from('not media at all'), contentType: 'image/png' });
    expect(await typeOf()).toBe(errorTypes.permanent);
    // The bytes may well be a video; this worker cannot write them down to measure (a full disk).
    const mp4 = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypmp42'), Buffer.alloc(64)]);
    fetchResult = () => Promise.resolve({ bytes: mp4, contentType: 'video/mp4' });
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = path.join(folder, 'no-such-folder');
    try {
      expect(await typeOf()).not.toBe(errorTypes.permanent);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    expect(await rowOf(start.generationId)).toMatchObject({ status: 'queued', credits_refunded: false });
  });

  it('a refunded generation keeps no files: its inline inputs and partial outputs are deleted', async () => {
    const inputs = 'i' + 'x'.repeat(20);
    await mkdir(path.join(folder, inputs), { recursive: true });
    await writeFile(path.join(folder, inputs, 'image-0.png'), pngClaiming(8, 8));
    const start = await admitted('refunded with an inline image', inputs);
    await activities().refund(start.generationId, generationErrors.timedOut('too slow'));
    await activities().discardContent(start.generationId);
    expect(await readdir(folder)).not.toContain(inputs);
    expect(await rowOf(start.generationId)).toMatchObject({
      status: 'failed',
      content_expired: true,
      input: null,
    });
  });

  it('never deletes anything of a generation that succeeded or waits in review', async () => {
    const start = await admitted('kept after success');
    fetchResult = () => Promise.resolve({ bytes: pngClaiming(64, 48), contentType: 'image/png' });
    const { outputs } = await persist(start.generationId);
    await activities().discardContent(start.generationId);
    const prefix = new URL(outputs[0]!.url).pathname.split('/')[1]!;
    expect(await readdir(folder)).toContain(prefix);
    expect(await rowOf(start.generationId)).toMatchObject({ status: 'succeeded', content_expired: false });
  });
});
