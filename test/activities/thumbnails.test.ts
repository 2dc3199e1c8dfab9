import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { createThumbnailActivities } from '../../src/activities/thumbnail-activities.js';
import { settleDebit } from '../../src/activities/debit.js';
import type { Provider, ProviderResult } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';
import { galleryOf } from '../support/ledger.js';
import { sql } from 'slonik';
import { z } from 'zod';

/**
 * The gallery's thumbnails are not the customer's result: persistResults stores the image, marks
 * the generation succeeded and records the image's thumbnail as pending, and a sweep
 * (makePendingThumbnails, on the thumbnails' own task queue, started by a schedule) makes the
 * pending ones in bounded batches, from the stored image, against real PostgreSQL and storage.
 */
describe('the gallery thumbnail, after persistResults', () => {
  let db: TestDatabase;
  let folder: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    folder = await mkdtemp(path.join(os.tmpdir(), 'thumbnails-'));
  });
  afterAll(async () => {
    await db?.drop();
    await rm(folder, { recursive: true, force: true });
  });

  const pendingOf = (generationId: string) =>
    db.pool.anyFirst(sql.type(z.object({ thumbnail_pending: z.boolean() }))`
      SELECT thumbnail_pending FROM gallery_images WHERE generation_id = ${generationId} ORDER BY id`);

  /** A generation admitted and persisted with one 1200 × 600 image; its id and the image's storage key. */
  async function persisted(storage: LocalStorage, prompt: string) {
    const account = await createPaidAccount(db.pool);
    const start = generationStart(account, prompt);
    const { generationId } = start;
    expect((await settleDebit(db.pool, start, 10)).outcome).toBe('accepted');
    const png = await sharp({ create: { width: 1200, height: 600, channels: 3, background: '#306090' } })
      .png()
      .toBuffer();
    const provider = {
      fetchResult: () => Promise.resolve({ bytes: png, contentType: 'image/png' }),
    } as unknown as Provider;
    const activities = createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage,
      concurrencyLimit: 10,
    });
    const result: ProviderResult = { width: 1200, height: 600, contentType: 'image/png' };
    const persist = (...args: Parameters<typeof activities.persistResults>) =>
      activities.persistResults(...args);
    const done = await new MockActivityEnvironment().run<
      Parameters<typeof persist>,
      Awaited<ReturnType<typeof persist>>,
      typeof persist
    >(persist, { generationId, model: 'lumen-lite', jobId: `sim:job-${prompt}`, results: [result] }, 60_000);
    expect(done.outputs).toHaveLength(1);
    const [image] = await galleryOf(db.pool, generationId);
    return { generationId, key: storage.keyOf(image!.url)! };
  }

  it('is pending after the success, made by the sweep from the stored image, 400 px wide, once', async () => {
    const storage = new LocalStorage(folder, 'http://results.test');
    const sweep = createThumbnailActivities({ db: db.pool, storage });
    const { generationId, key } = await persisted(storage, 'a wide harbour');
    // Succeeded, in the gallery, its thumbnail pending: the persist did not make it.
    expect(await storage.read(key.prefix, 'output-0-thumb.webp')).toBeNull();
    expect(await pendingOf(generationId)).toEqual([true]);

    const options = { batchSize: 50, maxBatches: 20 };
    expect(await new MockActivityEnvironment().run(sweep.makePendingThumbnails, options)).toEqual({
      made: 1,
      more: false,
    });
    const thumbnail = await storage.read(key.prefix, 'output-0-thumb.webp');
    const meta = await sharp(thumbnail!).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height }).toEqual({
      format: 'webp',
      width: 400,
      height: 200,
    });
    expect(await pendingOf(generationId)).toEqual([false]);
    // Nothing is pending any more: the next sweep makes none.
    expect(await new MockActivityEnvironment().run(sweep.makePendingThumbnails, options)).toEqual({
      made: 0,
      more: false,
    });
  });

  it('makes at most its budget per sweep and says more are left; an image gone is not retried', async () => {
    const storage = new LocalStorage(folder, 'http://results.test');
    const sweep = createThumbnailActivities({ db: db.pool, storage });
    const first = await persisted(storage, 'first');
    const second = await persisted(storage, 'second');
    const gone = await persisted(storage, 'gone');
    await rm(path.join(folder, gone.key.prefix), { recursive: true, force: true });

    const one = { batchSize: 1, maxBatches: 1 };
    expect(await new MockActivityEnvironment().run(sweep.makePendingThumbnails, one)).toEqual({
      made: 1,
      more: true,
    });
    expect(await pendingOf(first.generationId)).toEqual([false]);
    expect(await pendingOf(second.generationId)).toEqual([true]);
    expect(
      await new MockActivityEnvironment().run(sweep.makePendingThumbnails, { batchSize: 1, maxBatches: 5 }),
    ).toEqual({ made: 1, more: false });
    expect(await storage.read(second.key.prefix, 'output-0-thumb.webp')).not.toBeNull();
    // The image whose file was gone is marked too: there is nothing to make it from.
    expect(await pendingOf(gone.generationId)).toEqual([false]);
  });
});
