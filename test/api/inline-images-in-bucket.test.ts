import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { bearer, createPaidAccount, startTestApi } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import {
  deleteObjectsDenied,
  startFaultyProxy,
  startS3Server,
  type FaultyProxy,
  type S3TestServer,
} from '../support/s3-server.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

/** The API storing inline images in a bucket (moto) that fails now and then. */
describe('inline images in a bucket that fails', () => {
  let s3: S3TestServer;
  let proxy: FaultyProxy;
  let bucket: string;
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiService;
  let dataUri: string;
  const keysIn = async () =>
    ((await s3.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);

  beforeAll(async () => {
    s3 = await startS3Server();
    bucket = await s3.createBucket();
    proxy = await startFaultyProxy(s3.endpoint);
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool);
    api = await startTestApi(db.url, { ...worker.apiEnv, ...s3.env(bucket, 'inputs', proxy.endpoint) });
    const png = await sharp({ create: { width: 32, height: 32, channels: 3, background: '#3060c0' } })
      .png()
      .toBuffer();
    dataUri = `data:image/png;base64,${png.toString('base64')}`;
  });
  afterAll(async () => {
    await api?.close();
    await worker?.close();
    await db?.drop();
    await proxy?.close();
    await s3?.stop();
  });

  it('answers 503, charging nothing, when the images cannot be stored', async () => {
    const account = await createPaidAccount(db.pool, { oneTime: 100 });
    proxy.fault = ({ method }) =>
      method === 'PUT'
        ? { status: 503, body: '<Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>' }
        : undefined;
    try {
      const response = await createGeneration(
        api,
        account.key,
        { model: 'lumen-pro', prompt: 'stored nowhere', images: [dataUri] },
        'store-down',
      );
      expect(response.statusCode).toBe(503);
      expect(response.json().error.code).toBe('service_unavailable');
    } finally {
      proxy.fault = null;
    }
    const credits = await api.app.inject({ url: '/v1/credits', headers: bearer(account.key) });
    expect(credits.json().credits).toBe(100);
  });

  it('still answers a refusal when its images cannot be deleted', async () => {
    const poor = await createPaidAccount(db.pool, { oneTime: 1 });
    proxy.fault = deleteObjectsDenied;
    try {
      const refused = await createGeneration(api, poor.key, {
        model: 'lumen-pro',
        prompt: 'too dear',
        images: [dataUri],
      });
      expect(refused.statusCode).toBe(402);
      expect(refused.json().error.code).toBe('insufficient_credits');
      expect(proxy.faulted).toBeGreaterThan(0);
      expect(await chargesOf(db.pool, String(refused.headers['x-request-id']))).toMatchObject({ debits: 0 });
    } finally {
      proxy.fault = null;
    }
    // Left behind (a lifecycle rule's to remove); with the store well, a refusal leaves nothing.
    const left = await keysIn();
    expect(left).toHaveLength(1);
    const again = await createGeneration(api, poor.key, {
      model: 'lumen-pro',
      prompt: 'too dear',
      images: [dataUri],
    });
    expect(again.statusCode).toBe(402);
    expect(await keysIn()).toEqual(left);
  });
});
