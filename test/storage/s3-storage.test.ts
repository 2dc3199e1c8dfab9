import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, storageLocation } from '../../src/config/service-config.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { createS3Client } from '../../src/storage/s3-objects.js';
import { S3Storage, StorageDeleteError } from '../../src/storage/s3-storage.js';
import {
  deleteObjectsDenied,
  startFaultyProxy,
  startS3Server,
  type FaultyProxy,
  type S3TestServer,
} from '../support/s3-server.js';

const baseUrl = 'https://results.example.com';

/** S3Storage against a real S3-compatible server (moto), configured as the processes configure it. */
describe('S3Storage', () => {
  let s3: S3TestServer;
  let bucket: string;
  let proxy: FaultyProxy;
  /** The storage a process gets from STORAGE_URL and the S3_ variables, through `endpoint`. */
  const storageThrough = (endpoint: string, keyPrefix = 'results') => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://unused',
      TEMPORAL_ADDRESS: 'unused:7233',
      RESULT_BASE_URL: baseUrl,
      ...s3.env(bucket, keyPrefix, endpoint),
    });
    const storage = openStorage(storageLocation(config), config.RESULT_BASE_URL);
    expect(storage).toBeInstanceOf(S3Storage);
    return storage as S3Storage;
  };
  const keysUnder = async (prefix: string) => {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.client.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
      );
      keys.push(...(page.Contents ?? []).map((object) => object.Key!));
      token = page.NextContinuationToken;
    } while (token);
    return keys;
  };

  beforeAll(async () => {
    s3 = await startS3Server();
    bucket = await s3.createBucket();
    proxy = await startFaultyProxy(s3.endpoint);
  });
  afterAll(async () => {
    await proxy?.close();
    await s3?.stop();
  });

  it('puts under the key prefix, reads back, and answers null for what is not there', async () => {
    const storage = storageThrough(s3.endpoint);
    const url = await storage.put('rabc', 'output-0.png', Buffer.from('picture'));
    expect(url).toBe(`${baseUrl}/rabc/output-0.png`);
    expect(await keysUnder('results/')).toEqual(['results/rabc/output-0.png']);
    expect(await storage.read('rabc', 'output-0.png')).toEqual(Buffer.from('picture'));
    expect(await storage.head('rabc', 'output-0.png')).toMatchObject({ size: 7, contentType: 'image/png' });
    expect(await storage.read('rabc', 'other.png')).toBeNull();
    expect(await storage.read('..', 'etc')).toBeNull();
    expect(await storage.read('rabc', '../../x')).toBeNull();
    expect(storage.keyOf(url)).toEqual({ prefix: 'rabc', name: 'output-0.png' });
    await expect(storage.put('../up', 'x.png', Buffer.from('x'))).rejects.toThrow(/unsafe/);
  });

  it('downloads an object into a file (streamed), false for what is not there, and stops when told', async () => {
    const storage = storageThrough(s3.endpoint);
    const bytes = Buffer.alloc(3 * 1024 * 1024, 7);
    await storage.put('rdown', 'output-0.mp4', bytes);
    const dir = await mkdtemp(path.join(os.tmpdir(), 's3-download-'));
    try {
      const file = path.join(dir, 'copy.mp4');
      expect(await storage.download('rdown', 'output-0.mp4', file)).toBe(true);
      expect((await readFile(file)).equals(bytes)).toBe(true);
      expect(await storage.download('rdown', 'other.mp4', path.join(dir, 'none'))).toBe(false);
      expect(await storage.download('..', 'etc', path.join(dir, 'none'))).toBe(false);
      await expect(
        storage.download('rdown', 'output-0.mp4', path.join(dir, 'stopped'), AbortSignal.abort()),
      ).rejects.toThrow(/abort/i);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a missing bucket is an error, not a missing file', async () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://unused',
      TEMPORAL_ADDRESS: 'unused:7233',
      ...s3.env('no-such-bucket-here'),
    });
    const storage = openStorage(storageLocation(config), baseUrl) as S3Storage;
    await expect(storage.read('rabc', 'output-0.png')).rejects.toThrow(/bucket/i);
    await expect(storage.check()).rejects.toThrow();
  });

  it('deletes everything under a prefix, page by page, and nothing beside it', async () => {
    // Pages of 3 keys (S3's are 1,000: putting a thousand objects into moto takes 13 s).
    const client = createS3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true });
    const storage = new S3Storage(client, { bucket, keyPrefix: 'results/' }, baseUrl, 3);
    for (let i = 0; i < 10; i++) await storage.put('rmany', `output-${i}.png`, Buffer.from('x'));
    await storage.put('rmanyother', 'output-0.png', Buffer.from('kept'));
    expect(await keysUnder('results/rmany/')).toHaveLength(10);

    await storage.deletePrefix('rmany');
    expect(await keysUnder('results/rmany/')).toEqual([]);
    expect(await storage.read('rmanyother', 'output-0.png')).toEqual(Buffer.from('kept'));
    // Deleting what is gone is not an error.
    await storage.deletePrefix('rmany');
  });

  it('throws when DeleteObjects names keys it could not delete, and the objects stay until a retry succeeds', async () => {
    const storage = storageThrough(proxy.endpoint);
    await storage.put('rdenied', 'output-0.png', Buffer.from('a'));
    await storage.put('rdenied', 'output-1.png', Buffer.from('b'));
    proxy.fault = deleteObjectsDenied;
    try {
      const failure = await storage.deletePrefix('rdenied').catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StorageDeleteError);
      expect((failure as Error).message).toMatch(/2 of 2 objects under rdenied could not be deleted/);
      expect(await keysUnder('results/rdenied/')).toHaveLength(2);
    } finally {
      proxy.fault = null;
    }
    await storage.deletePrefix('rdenied');
    expect(await keysUnder('results/rdenied/')).toEqual([]);
  });

  it('throws when the store answers with an error, to listing or deleting', async () => {
    const storage = storageThrough(proxy.endpoint);
    await storage.put('rbroken', 'output-0.png', Buffer.from('a'));
    // Refused outright (the SDK would retry a 5xx a few times first, with the same outcome).
    const unavailable = {
      status: 403,
      body: '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>',
    };
    try {
      proxy.fault = ({ method, url }) =>
        method === 'GET' && url.includes('list-type=2') ? unavailable : undefined;
      await expect(storage.deletePrefix('rbroken')).rejects.toThrow();
      proxy.fault = ({ method, url }) =>
        method === 'POST' && url.includes('delete') ? unavailable : undefined;
      await expect(storage.deletePrefix('rbroken')).rejects.toThrow();
    } finally {
      proxy.fault = null;
    }
    expect(await keysUnder('results/rbroken/')).toHaveLength(1);
  });

  it('deletes key by key on a store that has no DeleteObjects', async () => {
    const storage = storageThrough(proxy.endpoint);
    for (let i = 0; i < 3; i++) await storage.put('rsingle', `output-${i}.png`, Buffer.from('x'));
    proxy.fault = ({ method, url }) =>
      method === 'POST' && url.includes('delete')
        ? {
            status: 501,
            body: '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>',
          }
        : undefined;
    try {
      await storage.deletePrefix('rsingle');
      expect(proxy.faulted).toBeGreaterThan(0);
      expect(await keysUnder('results/rsingle/')).toEqual([]);
    } finally {
      proxy.fault = null;
    }
  });

  it('streams a byte range, and says when a range starts past the end', async () => {
    const storage = storageThrough(s3.endpoint);
    await storage.put('rrange', 'output-0.png', Buffer.from('0123456789'));
    const read = await storage.open('rrange', 'output-0.png', { range: { start: 2, end: 5 } });
    expect(read).toMatchObject({ kind: 'found', length: 4, range: { start: 2, end: 5 }, head: { size: 10 } });
    expect(await storage.open('rrange', 'output-0.png', { range: { start: 10 } })).toEqual({
      kind: 'unsatisfiable',
      size: 10,
    });
    expect(await storage.open('rrange', 'missing.png')).toEqual({ kind: 'missing' });
    if (read.kind === 'found') read.body.destroy();
  });
});
