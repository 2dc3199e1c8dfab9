import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, storageLocation } from '../../src/config/service-config.js';
import { createLogger } from '../../src/process/logger.js';
import { buildResultHost } from '../../src/result-host/server.js';
import { openBucket, openStorage } from '../../src/storage/open-storage.js';
import type { Storage } from '../../src/storage/storage.js';
import {
  startFaultyProxy,
  startS3Server,
  type FaultyProxy,
  type S3TestServer,
} from '../support/s3-server.js';

const bytes = Buffer.from(Array.from({ length: 100 }, (_, i) => i));
const logger = createLogger('results-test', 'silent');

let s3: S3TestServer;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.stop();
});

/**
 * The result host serving the same file from a folder (@fastify/static) and streaming it from a
 * bucket (moto): a client cannot tell them apart.
 */
describe('the result host over a folder and over a bucket', () => {
  let bucket: string;
  let dir: string;
  const hosts: Record<'folder' | 'bucket', { host: FastifyInstance; storage: Storage }> = {} as never;

  beforeAll(async () => {
    bucket = await s3.createBucket();
    dir = await mkdtemp(path.join(os.tmpdir(), 'result-host-'));
    const config = loadConfig({
      DATABASE_URL: 'postgres://unused',
      TEMPORAL_ADDRESS: 'unused:7233',
      ...s3.env(bucket, 'served'),
    });
    const location = storageLocation(config);
    if (location.kind !== 'bucket') throw new Error('expected a bucket');
    const bucketStorage = openBucket(location, config.RESULT_BASE_URL);
    hosts.bucket = { host: await buildResultHost({ bucket: bucketStorage, logger }), storage: bucketStorage };
    hosts.folder = {
      host: await buildResultHost({ storageDir: dir, logger }),
      storage: openStorage({ kind: 'folder', dir }, config.RESULT_BASE_URL),
    };
    for (const { storage } of Object.values(hosts)) {
      await storage.put('rtoken', 'output-0.png', bytes);
      await storage.put('rtoken', 'clip.mp4', bytes);
    }
  });
  afterAll(async () => {
    for (const { host } of Object.values(hosts)) await host?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  describe.each(['folder', 'bucket'] as const)('from a %s', (kind) => {
    const get = (url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') =>
      hosts[kind].host.inject({ method, url, headers });

    it('serves the whole file with its type, length and immutable caching', async () => {
      const response = await get('/rtoken/output-0.png');
      expect(response.statusCode).toBe(200);
      expect(response.rawPayload).toEqual(bytes);
      expect(response.headers).toMatchObject({
        'content-type': 'image/png',
        'content-length': '100',
        'accept-ranges': 'bytes',
        'cache-control': 'public, max-age=31536000, immutable',
      });
      expect(response.headers.etag).toBeTruthy();
      expect(response.headers['last-modified']).toBeTruthy();
      expect((await get('/rtoken/clip.mp4')).headers['content-type']).toBe('video/mp4');
    });

    it('serves one byte range as 206, and answers 416 to a range past the end', async () => {
      const middle = await get('/rtoken/clip.mp4', { range: 'bytes=10-19' });
      expect(middle.statusCode).toBe(206);
      expect(middle.rawPayload).toEqual(bytes.subarray(10, 20));
      expect(middle.headers).toMatchObject({ 'content-range': 'bytes 10-19/100', 'content-length': '10' });

      const tail = await get('/rtoken/clip.mp4', { range: 'bytes=-5' });
      expect(tail.statusCode).toBe(206);
      expect(tail.rawPayload).toEqual(bytes.subarray(95));
      expect(tail.headers['content-range']).toBe('bytes 95-99/100');

      const open = await get('/rtoken/clip.mp4', { range: 'bytes=90-' });
      expect(open.statusCode).toBe(206);
      expect(open.headers['content-range']).toBe('bytes 90-99/100');

      const clamped = await get('/rtoken/clip.mp4', { range: 'bytes=98-500' });
      expect(clamped.statusCode).toBe(206);
      expect(clamped.headers['content-range']).toBe('bytes 98-99/100');

      const past = await get('/rtoken/clip.mp4', { range: 'bytes=100-' });
      expect(past.statusCode).toBe(416);
      expect(past.headers['content-range']).toBe('bytes */100');

      // Not one range of bytes: the whole file.
      for (const range of ['bytes=0-1,5-6', 'lines=1-2']) {
        const whole = await get('/rtoken/clip.mp4', { range });
        expect(whole.statusCode, range).toBe(200);
        expect(whole.rawPayload).toEqual(bytes);
      }
    });

    it('answers HEAD with the headers and no body', async () => {
      const head = await get('/rtoken/output-0.png', {}, 'HEAD');
      expect(head.statusCode).toBe(200);
      expect(head.headers).toMatchObject({ 'content-type': 'image/png', 'content-length': '100' });
      expect(head.rawPayload).toHaveLength(0);
    });

    it('answers a conditional GET of an unchanged file with 304', async () => {
      const { etag } = (await get('/rtoken/output-0.png')).headers;
      const again = await get('/rtoken/output-0.png', { 'if-none-match': String(etag) });
      expect(again.statusCode).toBe(304);
      expect(again.rawPayload).toHaveLength(0);
    });

    it('answers 404 in our envelope for what is not there, whatever the path', async () => {
      for (const url of [
        '/rtoken/output-9.png',
        '/rnothing/output-0.png',
        '/rtoken',
        '/a/b/c',
        '/rtoken/..%2Foutput-0.png',
        // Forms @fastify/static 10 refuses with its own 403 (dot segments, empty segments, dotfiles):
        // a client learns nothing from them, so they get the same 404 as any other miss.
        '/rtoken/x/..%2F..%2Frtoken/output-0.png',
        '/rtoken//output-0.png',
        '/rtoken/.output-0.png',
        '/.rtoken/output-0.png',
      ]) {
        for (const method of ['GET', 'HEAD'] as const) {
          const response = await get(url, {}, method);
          expect(response.statusCode, `${method} ${url}`).toBe(404);
          if (method === 'GET')
            expect(response.json(), url).toEqual({
              error: { code: 'not_found', message: 'No such result. It may have expired.' },
            });
        }
      }
    });
  });
});

describe('the result host over a bucket that fails', () => {
  let proxy: FaultyProxy;
  let host: FastifyInstance;

  beforeAll(async () => {
    const bucket = await s3.createBucket();
    proxy = await startFaultyProxy(s3.endpoint);
    const config = loadConfig({
      DATABASE_URL: 'postgres://unused',
      TEMPORAL_ADDRESS: 'unused:7233',
      ...s3.env(bucket, '', proxy.endpoint),
    });
    const location = storageLocation(config);
    if (location.kind !== 'bucket') throw new Error('expected a bucket');
    const storage = openBucket(location, config.RESULT_BASE_URL);
    await storage.put('rtoken', 'output-0.png', bytes);
    host = await buildResultHost({ bucket: storage, logger });
  });
  afterAll(async () => {
    await host?.close();
    await proxy?.close();
  });

  it('is ready while the bucket answers, and not ready once it does not', async () => {
    expect((await host.inject({ url: '/readyz' })).json()).toEqual({
      status: 'ready',
      checks: { storage: 'ok' },
    });
    proxy.fault = () => ({ status: 403, body: '' });
    try {
      const ready = await host.inject({ url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json().status).toBe('not_ready');
    } finally {
      proxy.fault = null;
    }
  });

  it('answers 503 in our envelope, without the store’s words, when a read fails', async () => {
    proxy.fault = () => ({
      status: 403,
      body: '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>secret internals</Message></Error>',
    });
    try {
      const response = await host.inject({ url: '/rtoken/output-0.png' });
      expect(response.statusCode).toBe(503);
      expect(response.json().error.code).toBe('service_unavailable');
      expect(response.body).not.toContain('secret internals');
    } finally {
      proxy.fault = null;
    }
    expect((await host.inject({ url: '/rtoken/output-0.png' })).statusCode).toBe(200);
  });
});
