import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { settleDebit } from '../../src/activities/debit.js';
import { inProcessRenderer, type SimRenderer } from '../../src/providers/simulated/renderer.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';
import { galleryOf } from '../support/ledger.js';

/**
 * persistResults run in the SDK's activity context against real PostgreSQL and storage, with the
 * simulated provider drawing slowly: a single result that takes long to copy must not look like a
 * lost worker to Temporal (heartbeat timeout), or persistence would be retried forever.
 */
describe('persistResults', () => {
  let db: TestDatabase;
  let folder: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    folder = await mkdtemp(path.join(os.tmpdir(), 'persist-'));
  });
  afterAll(async () => {
    await db?.drop();
    await rm(folder, { recursive: true, force: true });
  });

  it('heartbeats on a clock while one slow result is copied, and stops when done', async () => {
    const account = await createPaidAccount(db.pool);
    const start = generationStart(account, 'a slow lighthouse');
    const { generationId } = start;
    const admitted = await settleDebit(db.pool, start, 10);
    expect(admitted.outcome).toBe('accepted');
    // The provider's machines are slow today: each picture takes 400 ms more to draw.
    const slowRenderer: SimRenderer = {
      async image(...args) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        return inProcessRenderer.image(...args);
      },
      video: (job) => inProcessRenderer.video(job),
    };
    const provider = new SimulatedProvider(db.pool, { delayMs: 0, renderer: slowRenderer });
    const { jobId } = await provider.submit({
      token: `tok_${generationId}`,
      model: 'lumen-lite',
      mediaType: 'image',
      prompt: 'a slow lighthouse',
      options: { aspect_ratio: '1:1', quality: 'basic', output_format: 'png' },
      images: [],
      longEdgePx: 256,
    });
    const status = await provider.status(jobId);
    if (status.state !== 'succeeded') throw new Error(`provider says ${status.state}`);

    const activities = createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage: new LocalStorage(folder, 'http://results.test'),
      concurrencyLimit: 10,
      persistHeartbeatMs: 50,
    });
    const environment = new MockActivityEnvironment();
    const heartbeats: unknown[] = [];
    environment.on('heartbeat', (details: unknown) => heartbeats.push(details));
    const persist = (...args: Parameters<typeof activities.persistResults>) =>
      activities.persistResults(...args);
    const persisted = await environment.run<
      Parameters<typeof persist>,
      Awaited<ReturnType<typeof persist>>,
      typeof persist
    >(persist, { generationId, model: 'lumen-lite', jobId, results: status.results }, 60_000);

    expect(persisted.outputs).toHaveLength(1);
    expect(persisted.outputs[0]).toMatchObject({ width: 256, height: 256, contentType: 'image/png' });
    expect(await galleryOf(db.pool, generationId)).toHaveLength(1);
    // 400 ms of drawing at a 50 ms clock: several heartbeats, all before the result was stored.
    expect(heartbeats.length).toBeGreaterThanOrEqual(3);
    expect(heartbeats[0]).toEqual({ stored: 0 });
    const afterwards = heartbeats.length;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(heartbeats).toHaveLength(afterwards);
  });
});
