import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { admitGeneration } from '../../src/activities/admission.js';
import type { Provider, ProviderResult } from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';
import { galleryOf } from '../support/ledger.js';

/**
 * The gallery's thumbnails are not the customer's result: persistResults stores the image and
 * marks the generation succeeded without one, and makeThumbnails (its own task queue, after the
 * success) makes each from the stored image, against real PostgreSQL and storage.
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

  it('is made after the success from the stored image, 400 px wide, and again on a retry', async () => {
    const account = await createPaidAccount(db.pool);
    const start = generationStart(account, 'a wide harbour');
    const { generationId } = start;
    expect((await admitGeneration(db.pool, start, 10)).outcome).toBe('accepted');
    const png = await sharp({ create: { width: 1200, height: 600, channels: 3, background: '#306090' } })
      .png()
      .toBuffer();
    const provider = {
      fetchResult: () => Promise.resolve({ bytes: png, contentType: 'image/png' }),
    } as unknown as Provider;
    const storage = new LocalStorage(folder, 'http://results.test');
    const activities = createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage,
      concurrencyLimit: 10,
    });
    const environment = new MockActivityEnvironment();
    const result: ProviderResult = { width: 1200, height: 600, contentType: 'image/png' };
    const persist = (...args: Parameters<typeof activities.persistResults>) =>
      activities.persistResults(...args);
    const persisted = await environment.run<
      Parameters<typeof persist>,
      Awaited<ReturnType<typeof persist>>,
      typeof persist
    >(persist, { generationId, model: 'lumen-lite', jobId: 'sim:job-wide', results: [result] }, 60_000);
    const [image] = await galleryOf(db.pool, generationId);
    const key = storage.keyOf(image!.url)!;
    expect(persisted.outputs).toHaveLength(1);
    // Succeeded, in the gallery, and no thumbnail yet: the persist did not wait on it.
    expect(await storage.read(key.prefix, 'output-0-thumb.webp')).toBeNull();

    expect(await environment.run(activities.makeThumbnails, generationId)).toEqual({ made: 1 });
    const thumbnail = await storage.read(key.prefix, 'output-0-thumb.webp');
    const meta = await sharp(thumbnail!).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height }).toEqual({
      format: 'webp',
      width: 400,
      height: 200,
    });
    // A retried attempt writes the same file.
    expect(await environment.run(activities.makeThumbnails, generationId)).toEqual({ made: 1 });
    expect(await storage.read(key.prefix, 'output-0-thumb.webp')).toEqual(thumbnail);
  });

  it('makes none for a generation without gallery images', async () => {
    const activities = createGenerationActivities({
      db: db.pool,
      providerFor: () => {
        throw new Error('no provider is asked');
      },
      storage: new LocalStorage(folder, 'http://results.test'),
      concurrencyLimit: 10,
    });
    const account = await createPaidAccount(db.pool);
    const start = generationStart(account, 'never persisted');
    expect(await new MockActivityEnvironment().run(activities.makeThumbnails, start.generationId)).toEqual({
      made: 0,
    });
  });
});
