import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { frameColour } from '../support/media.js';
import {
  deleteObjectsDenied,
  startFaultyProxy,
  startS3Server,
  type FaultyProxy,
  type S3TestServer,
} from '../support/s3-server.js';
import { startServiceProcess, workerProcesses, type WorkerProcesses } from '../support/worker-process.js';

/**
 * Past one machine: the API, two worker processes and the result host process, each in a folder
 * of its own, share nothing but PostgreSQL, Temporal and a bucket (moto). The workers reach the
 * bucket through a proxy that can refuse deletes, as a store can.
 */
describe('API, two workers and the result host sharing nothing but a bucket', () => {
  let s3: S3TestServer;
  let proxy: FaultyProxy;
  let bucket: string;
  let db: TestDatabase;
  let api: ApiService;
  let workers: WorkerProcesses;
  let resultHost: ChildProcess | undefined;
  let resultBaseUrl: string;
  let account: TestAccount;
  let scratch: string;
  /** Each process's own folder (its cwd and STORAGE_DIR): none may end up holding a file. */
  const folders: Record<string, string> = {};
  const taskQueue = `bucket-${randomBase62(8)}`;

  const objectsIn = async () =>
    ((await s3.client.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);
  const filesUnder = async (dir: string) =>
    (await readdir(dir, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile());

  beforeAll(async () => {
    s3 = await startS3Server();
    bucket = await s3.createBucket();
    proxy = await startFaultyProxy(s3.endpoint);
    db = await createTestDatabase();
    scratch = await mkdtemp(path.join(os.tmpdir(), 'shared-bucket-'));
    for (const name of ['api', 'worker-1', 'worker-2', 'result-host'])
      folders[name] = await mkdtemp(path.join(os.tmpdir(), `shared-bucket-${name}-`));
    resultBaseUrl = `http://127.0.0.1:${await freePort()}`;
    const common = {
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: taskQueue,
      RESULT_BASE_URL: resultBaseUrl,
      LOG_LEVEL: 'warn',
    };

    let started = 0;
    const workerFolder = () => folders[`worker-${started}`]!;
    workers = workerProcesses(
      () => {
        started++;
        return {
          ...common,
          ...s3.env(bucket, 'results', proxy.endpoint),
          STORAGE_DIR: workerFolder(),
          SIM_PROVIDER_DELAY_MS: '300',
          DATABASE_POOL_SIZE: '3',
        };
      },
      { cwd: workerFolder },
    );
    await workers.start();
    await workers.start();
    resultHost = await startServiceProcess(
      'result-host/main.ts',
      {
        ...common,
        ...s3.env(bucket, 'results'),
        STORAGE_DIR: folders['result-host']!,
        RESULT_PORT: new URL(resultBaseUrl).port,
      },
      { cwd: folders['result-host']! },
    );
    api = await startTestApi(db.url, {
      ...common,
      ...s3.env(bucket, 'results'),
      STORAGE_DIR: folders.api!,
      PROVIDER_POLL_INTERVAL_MS: '100',
      // Content expires 4 s after storage.
      RESULT_RETENTION_MS: '4000',
    });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(async () => {
    workers?.killAll();
    resultHost?.kill('SIGKILL');
    await api?.close();
    await db?.drop();
    await proxy?.close();
    await s3?.stop();
    for (const dir of [scratch, ...Object.values(folders)])
      if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('makes a video from an inline frame, serves it from the bucket, and expires it once deletes succeed', async () => {
    const green = await sharp({ create: { width: 160, height: 90, channels: 3, background: '#10c040' } })
      .png()
      .toBuffer();
    const created = await createGeneration(api, account.key, {
      model: 'motion-1',
      prompt: 'a harbour at dawn',
      first_frame_image: `data:image/png;base64,${green.toString('base64')}`,
    });
    expect(created.statusCode).toBe(202);
    const id = created.json().id as string;
    const done = await pollGeneration(api, account.key, id, undefined, 60_000);
    expect(done).toMatchObject({ status: 'succeeded', error: null });

    // The frame went through the bucket: the API stored it, a worker read it back.
    const frameUrl = done.input.first_frame_image as string;
    const videoUrl = done.output.videos[0].url as string;
    for (const url of [frameUrl, videoUrl]) expect(url.startsWith(`${resultBaseUrl}/`)).toBe(true);
    const keys = await objectsIn();
    expect(keys).toHaveLength(2);
    expect(keys).toContain(`results${new URL(frameUrl).pathname}`);
    expect(keys).toContain(`results${new URL(videoUrl).pathname}`);

    // Downloaded from the result host process, which streams it from the bucket.
    const download = await fetch(videoUrl);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('video/mp4');
    const video = Buffer.from(await download.arrayBuffer());
    expect(Number(download.headers.get('content-length'))).toBe(video.length);
    const file = path.join(scratch, 'video.mp4');
    await writeFile(file, video);
    const first = await frameColour(file, 0, scratch);
    expect(first.g).toBeGreaterThan(150);
    expect(first.r).toBeLessThan(60);
    const head = await fetch(videoUrl, { headers: { range: 'bytes=0-99' } });
    expect(head.status).toBe(206);
    expect(Buffer.from(await head.arrayBuffer())).toEqual(video.subarray(0, 100));

    // Expiry comes while the store refuses every delete: retried, never recorded as done.
    proxy.fault = deleteObjectsDenied;
    try {
      await expect.poll(() => proxy.faulted, { timeout: 20_000, interval: 100 }).toBeGreaterThanOrEqual(2);
      expect(await getGeneration(api, account.key, id)).toMatchObject({
        content_expired: false,
        output: { videos: [{ url: videoUrl }] },
      });
      expect(await objectsIn()).toHaveLength(2);
      expect((await fetch(videoUrl, { method: 'HEAD' })).status).toBe(200);
    } finally {
      proxy.fault = null;
    }

    // The store well again: the next attempt deletes the objects, then records the expiry.
    const expired = await pollGeneration(api, account.key, id, (g) => g.content_expired === true, 20_000);
    expect(expired).toMatchObject({ status: 'succeeded', input: null, output: null });
    expect(await objectsIn()).toEqual([]);
    const gone = await fetch(videoUrl);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: { code: string } }).error.code).toBe('not_found');

    // No process wrote a file of its own anywhere.
    for (const [name, dir] of Object.entries(folders)) expect(await filesUnder(dir), name).toEqual([]);
  }, 120_000);
});
