import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { importExampleCatalog } from '../support/example-catalog.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import {
  startFaultyProxy,
  startS3Server,
  type FaultyProxy,
  type S3TestServer,
} from '../support/s3-server.js';
import { waitFor } from '../support/wait.js';
import { workerProcesses } from '../support/worker-process.js';

/**
 * Issue 27 §2's audit note, with real worker processes: a worker killed (SIGKILL) while its submit
 * reads the reference image it inlines into the create (the bucket stalls) had sent nothing, so
 * the next worker sends the create once the dead holder's claim lapses, and the generation
 * succeeds. Before, the create was marked sent before the image was read, and Replicate, which
 * cannot be asked by our token, sent the generation to review.
 */
describe('a worker killed while preparing a create', () => {
  let s3: S3TestServer;
  let proxy: FaultyProxy;
  let bucket: string;
  let replicate: ReplicateServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let storageDir: string;
  let worker: ChildProcess | undefined;
  let stall = false;
  const taskQueue = `prepare-kill-${randomBase62(8)}`;
  const common = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '200',
    PROVIDER_DOWN_AFTER_FAILURES: '1000',
    // The shortest claim window allowed (60 s by default; `npm run test:faults` sets that): still
    // longer than any create's deadline, so the dead holder's claim is taken over as in production,
    // after less waiting.
    SUBMIT_CLAIM_WINDOW_MS: process.env.SUBMIT_CLAIM_WINDOW_MS ?? '25000',
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    LOG_LEVEL: 'warn',
    ...replicate.env(),
  });
  // The workers read the bucket through the proxy, which stalls reads when told to.
  const workers = workerProcesses(() => ({
    ...common(),
    ...s3.env(bucket, 'results', proxy.endpoint),
    DATABASE_URL: db.url,
  }));

  beforeAll(async () => {
    s3 = await startS3Server();
    bucket = await s3.createBucket();
    proxy = await startFaultyProxy(s3.endpoint);
    proxy.fault = ({ method }) => (stall && (method === 'GET' || method === 'HEAD') ? 'hang' : undefined);
    replicate = await ReplicateServer.start();
    db = await createTestDatabase();
    await importExampleCatalog(db.pool, 'replicate');
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'prepare-kill-'));
    api = await startTestApi(db.url, { ...common(), ...s3.env(bucket, 'results') });
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    worker = await workers.start();
  });
  afterAll(async () => {
    workers.killAll();
    await api?.close();
    await db?.drop();
    await replicate?.close();
    await proxy?.close();
    await s3?.stop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  it('the next worker sends it once the dead holder’s claim lapses: succeeded, one create, no review', async () => {
    const image = `data:image/png;base64,${(
      await sharp({ create: { width: 96, height: 64, channels: 3, background: '#3050c0' } })
        .png()
        .toBuffer()
    ).toString('base64')}`;
    stall = true;
    const posted = await createGeneration(api, account.key, {
      model: 'replicate-flux-kontext-pro',
      prompt: 'killed while preparing',
      images: [image],
    });
    expect([202, 503], posted.body).toContain(posted.statusCode);
    const id = await waitFor(() =>
      db.pool.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
        SELECT id FROM generations WHERE account_id = ${account.accountId}`),
    );
    const claim = () =>
      db.pool.one(sql.type(z.object({ claimed: z.boolean(), sent: z.boolean() }))`
        SELECT submit_claim IS NOT NULL AS claimed, submit_sent_at IS NOT NULL AS sent
        FROM generations WHERE id = ${id}`);
    // The submit holds the claim and is stuck reading the image it inlines.
    await waitFor(async () => proxy.faulted > 0 && (await claim()).claimed, 30_000);
    const beforeKill = await claim();

    const dying = worker!;
    const exited = new Promise((resolve) => dying.once('exit', resolve));
    dying.kill('SIGKILL');
    await exited;
    stall = false;
    worker = await workers.start();

    // The claim's window (25 s, or SUBMIT_CLAIM_WINDOW_MS) lapses; the next attempt sends as the first create.
    const done = await pollGeneration(api, account.key, id, undefined, 150_000);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false, error: null });
    const creates = replicate.requests.filter(
      (r) =>
        r.method === 'POST' && r.url.endsWith('/predictions') && r.body.includes('killed while preparing'),
    );
    expect(creates).toHaveLength(1);
    // Preparing was never taken for sending.
    expect(beforeKill).toEqual({ claimed: true, sent: false });
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  }, 240_000);
});
