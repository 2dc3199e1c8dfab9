import type { ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import sharp from 'sharp';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { modelDefinitionSchema } from '../../src/catalog/catalog-entry.js';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createLogger } from '../../src/process/logger.js';
import { buildResultHost } from '../../src/result-host/server.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { drawImage } from '../support/providers/fake-files.js';
import { promptContains } from '../support/providers/fake-http.js';
import {
  FalQueueServer,
  falRequestError,
  falValidationError,
} from '../support/providers/fal-queue-server.js';
import {
  accountCalls,
  decodedHistory,
  expectFlaggedForReview,
  placesHolding,
  refundedFailure,
  resultCopyFailed,
} from '../support/provider-lifecycle.js';
import { probeVideo } from '../support/providers/probe-video.js';
import { selfSignedCertificate, startTestServer, type TestServer } from '../support/test-servers.js';
import { crash, workerProcesses } from '../support/worker-process.js';

/**
 * fal end to end: the catalog entries of catalog/examples/fal.json, the real API, the generation
 * workflow and the real worker process (`src/worker/main.ts`, configured by FAL_KEY and
 * FAL_QUEUE_URL like production), against the local fal queue.
 */
describe('generations on fal', () => {
  const falKey = `fal-key-${randomBase62(16)}`;
  const taskQueue = `fal-${randomBase62(8)}`;
  let fal: FalQueueServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let storageDir: string;
  let resultBaseUrl: string;
  let resultHost: Awaited<ReturnType<typeof buildResultHost>>;
  let connection: Connection;
  let client: Client;
  let worker: ChildProcess;
  /** A customer's image host (HTTPS on loopback), its certificate trusted by the worker. */
  let frames: TestServer;
  let lastFrame: Buffer;
  let caFile: string;

  const apiEnv = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: resultBaseUrl,
    PROVIDER_POLL_INTERVAL_MS: '50',
    ...fal.env(),
  });
  /** The real worker, as `npm run worker` starts it. */
  const workers = workerProcesses(() => ({
    ...apiEnv(),
    DATABASE_URL: db.url,
    // The fake and its files are on 127.0.0.1, which outbound fetches refuse unless allowed.
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    NODE_EXTRA_CA_CERTS: caFile,
    LOG_LEVEL: 'debug',
  }));
  const startWorker = () => workers.start();

  beforeAll(async () => {
    fal = await FalQueueServer.start({ key: falKey });
    db = await createTestDatabase();
    // The example catalog file's entries, stored as the import stores them (parsed, defaults filled).
    const file = JSON.parse(
      await readFile(new URL('../../catalog/examples/fal.json', import.meta.url), 'utf8'),
    ) as { models: Array<{ id: string; sort_order: number; definition: unknown }> };
    for (const model of file.models) {
      const definition = modelDefinitionSchema.parse(model.definition);
      await db.pool.query(sql.unsafe`
        INSERT INTO models (id, media_type, definition, sort_order)
        VALUES (${model.id}, ${definition.media_type}, ${sql.jsonb(definition as never)}, ${model.sort_order})`);
    }
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'fal-results-'));
    await chmod(storageDir, 0o755);
    const certificate = await selfSignedCertificate();
    caFile = path.join(storageDir, 'frames-ca.pem');
    await writeFile(caFile, certificate.cert);
    lastFrame = await drawImage(64, 48);
    frames = await startTestServer(
      (_request, response) => void response.writeHead(200, { 'content-type': 'image/png' }).end(lastFrame),
      { tls: certificate },
    );
    const resultPort = await freePort();
    resultBaseUrl = `http://127.0.0.1:${resultPort}`;
    resultHost = await buildResultHost({ storageDir, logger: createLogger('results-test', 'silent') });
    await resultHost.listen({ host: '127.0.0.1', port: resultPort });
    api = await startTestApi(db.url, apiEnv());
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });
    worker = await startWorker();
  });
  afterAll(async () => {
    workers.killAll();
    await connection?.close();
    await api?.close();
    await resultHost?.close();
    await fal?.close();
    await frames?.close();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const { balance, post, finished, made } = accountCalls(() => ({ api, key: account.key }));
  const ledgerOf = (id: string) => chargesOf(db.pool, id);
  /** The fal requests (accepted creates) whose prompt holds `text`. */
  const requestsFor = (text: string) =>
    fal.accepted().filter((job) => String(job.input.prompt).includes(text));
  /** Create calls whose body holds `text` (accepted by the fake or not). */
  const createsFor = (text: string) =>
    fal.requests.filter((r) => r.method === 'POST' && !r.url.includes('/requests/') && r.body.includes(text))
      .length;

  it('succeeds: the mapped input reaches fal, and the stored file is the size fal made', async () => {
    fal.script({ size: { width: 640, height: 360 } }, promptContains('harbour at dawn'));
    const before = await balance();
    const created = await post({
      model: 'fal-flux-dev',
      prompt: 'a harbour at dawn',
      aspect_ratio: '16:9',
      output_format: 'png',
    });
    expect(created).toMatchObject({ status: 'queued', credits: 3 });
    const done = await finished(created.id as string);
    expect(done).toMatchObject({ status: 'succeeded', credits: 3, credits_refunded: false, error: null });
    expect(done.output.images).toHaveLength(1);
    expect(done.output.images[0]).toMatchObject({ width: 640, height: 360 });

    // The stored file itself, measured.
    const stored = Buffer.from(await (await fetch(done.output.images[0].url as string)).arrayBuffer());
    const measured = await sharp(stored).metadata();
    expect([measured.width, measured.height, measured.format]).toEqual([640, 360, 'png']);

    const [request] = requestsFor('harbour at dawn');
    expect(request).toMatchObject({
      endpoint: 'fal-ai/flux/dev',
      input: {
        prompt: 'a harbour at dawn',
        image_size: 'landscape_16_9',
        output_format: 'png',
        num_images: 1,
        enable_safety_checker: true,
      },
    });
    expect(createsFor('harbour at dawn')).toBe(1);
    expect(await balance()).toBe(before - 3);
    expect(await ledgerOf(created.id as string)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('sends an inline reference image to fal as a data URI, not as a URL on our result host', async () => {
    const png = await drawImage(48, 32);
    const created = await post({
      model: 'fal-flux-kontext-pro',
      prompt: 'put a donut next to the flour',
      images: [`data:image/png;base64,${png.toString('base64')}`],
    });
    const done = await finished(created.id as string);
    expect(done).toMatchObject({ status: 'succeeded', credits: 5 });
    const [request] = requestsFor('donut next to the flour');
    expect(request!.endpoint).toBe('fal-ai/flux-pro/kontext');
    expect(request!.input.image_url).toBe(`data:image/png;base64,${png.toString('base64')}`);
    expect(JSON.stringify(fal.requests)).not.toContain(resultBaseUrl);
  });

  it('makes a first/last-frame video: frames mapped, duration as fal spells it, the MP4 measured', async () => {
    fal.script({ video: { width: 320, height: 240, durationSeconds: 1 } }, promptContains('tide comes in'));
    const first = await drawImage(64, 48);
    // The customer's own URL: fetched once by us before the submit, sent to fal as our copy.
    const last = `${frames.origin}/last.png`;
    const created = await post({
      model: 'fal-kling-2.5-turbo-pro',
      prompt: 'the tide comes in',
      first_frame_image: `data:image/png;base64,${first.toString('base64')}`,
      last_frame_image: last,
    });
    expect(created.credits).toBe(40); // 5 s at 8 credits a second
    const done = await finished(created.id as string, 60_000);
    expect(done).toMatchObject({ status: 'succeeded', error: null });
    expect(done.output.videos[0]).toMatchObject({
      width: 320,
      height: 240,
      duration_seconds: 1,
      content_type: 'video/mp4',
    });
    const stored = Buffer.from(await (await fetch(done.output.videos[0].url as string)).arrayBuffer());
    expect(await probeVideo(stored)).toEqual({ width: 320, height: 240, seconds: 1 });
    expect(frames.requests).toEqual(['/last.png']);
    const [request] = requestsFor('tide comes in');
    expect(request).toMatchObject({
      endpoint: 'fal-ai/kling-video/v2.5-turbo/pro/image-to-video',
      input: {
        image_url: `data:image/png;base64,${first.toString('base64')}`,
        tail_image_url: `data:image/png;base64,${lastFrame.toString('base64')}`,
        duration: '5',
      },
    });
  }, 90_000);

  it('422 on create → refunded, provider_rejected, already in the 202; one create', async () => {
    fal.failCreate({ kind: 'status', status: 422 }, promptContains('refused outright'));
    const before = await balance();
    const answered = await post({ model: 'fal-flux-schnell', prompt: 'refused outright' });
    expect(answered).toMatchObject({ ...refundedFailure('provider_rejected'), credits: 1 });
    expect(await balance()).toBe(before);
    expect(await ledgerOf(answered.id as string)).toMatchObject({ debits: 1, refunds: 1 });
    expect(createsFor('refused outright')).toBe(1);
  });

  it('a model’s 422 on the result → refunded, provider_rejected', async () => {
    fal.script(
      { error: falValidationError('image_size', 'Input should be a valid size') },
      promptContains('odd size'),
    );
    const before = await balance();
    const created = await post({ model: 'fal-flux-schnell', prompt: 'odd size' });
    const done = await finished(created.id as string);
    expect(done).toMatchObject(refundedFailure('provider_rejected'));
    expect(await balance()).toBe(before);
    expect(await ledgerOf(created.id as string)).toMatchObject({ debits: 1, refunds: 1 });
  });

  it('COMPLETED with an error result → refunded once, generation_failed, in a safe message', async () => {
    fal.script(
      {
        error: falRequestError(
          'request_timeout',
          504,
          `Request timed out fetching https://storage.example/x?sig=abc with Key ${falKey}`,
        ),
      },
      promptContains('too slow'),
    );
    const before = await balance();
    const created = await post({ model: 'fal-flux-schnell', prompt: 'too slow' });
    const done = await finished(created.id as string);
    expect(done).toMatchObject(refundedFailure('generation_failed'));
    expect(done.error.message).toContain('request_timeout');
    expect(done.error.message).not.toContain(falKey);
    expect(done.error.message).not.toMatch(/https?:|sig=/);
    expect(await balance()).toBe(before);
    // Refunded exactly once, however often the workflow looked.
    await new Promise((r) => setTimeout(r, 500));
    expect(await ledgerOf(created.id as string)).toMatchObject({ debits: 1, refunds: 1 });
  });

  it.each([
    ['drop', { kind: 'drop' } as const],
    ['hang', { kind: 'hang' } as const],
  ])(
    'a create whose answer is lost (%s) → needs review, nothing refunded, exactly one create',
    async (name, fault) => {
      const prompt = `lost answer ${name}`;
      fal.failCreate(fault, promptContains(prompt));
      const before = await balance();
      const posted = await post({ model: 'fal-flux-schnell', prompt });
      // A dropped connection ends the create at once: the POST's second attempt asks fal (lookup),
      // which cannot say, and the 202 already tells the client. A create left hanging is waited for
      // until its own deadline (20 s) rather than taken for lost while it may still be answered.
      const answered =
        name === 'drop'
          ? posted
          : await pollGeneration(api, account.key, posted.id as string, (g) => g.status !== 'queued', 45_000);
      if (name === 'hang') expect(posted.status).toBe('queued');
      expect(answered).toMatchObject({
        status: 'failed',
        credits: 1,
        credits_refunded: false,
        error: { code: 'submission_unresolved' },
      });
      await expectFlaggedForReview(client, db.pool, answered.id as string);
      expect(await balance()).toBe(before - 1);
      expect(await ledgerOf(answered.id as string)).toMatchObject({ debits: 1, refunds: 0 });
      // fal got the request whole (it holds the job), and only once.
      await new Promise((r) => setTimeout(r, 1000));
      expect(createsFor(prompt)).toBe(1);
      expect(requestsFor(prompt)).toHaveLength(1);
      expect((await getGeneration(api, account.key, answered.id as string)).status).toBe('failed');
    },
    60_000,
  );

  it('rides out 429s with Retry-After on create: waits as told, then succeeds; every create counted', async () => {
    const prompt = 'busy afternoon';
    fal.failCreate({ kind: 'status', status: 429, retryAfter: 1 }, promptContains(prompt));
    fal.failCreate({ kind: 'status', status: 429, retryAfter: 1 }, promptContains(prompt));
    const started = Date.now();
    const created = await post({ model: 'fal-flux-schnell', prompt });
    // Both attempts made while the POST waits were throttled, a second apart as fal asked.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(created).toMatchObject({ status: 'queued', credits_refunded: false });
    const done = await finished(created.id as string);
    expect(done).toMatchObject({ status: 'succeeded', error: null });
    expect(createsFor(prompt)).toBe(3);
    expect(requestsFor(prompt)).toHaveLength(1);
    expect(await ledgerOf(created.id as string)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a worker killed while fal holds the job: a new worker resumes it, with no second create', async () => {
    const prompt = 'held through a crash';
    fal.script({ hold: true }, promptContains(prompt));
    const created = await post({ model: 'fal-flux-schnell', prompt, aspect_ratio: '4:3' });
    // The worker is polling the held request when it dies.
    await expect.poll(() => requestsFor(prompt)[0]?.polls ?? 0, { timeout: 10_000 }).toBeGreaterThan(2);
    await crash(worker);
    worker = await startWorker();
    const { id: requestId } = requestsFor(prompt)[0]!;
    const pollsBefore = requestsFor(prompt)[0]!.polls;
    // The new worker takes the wait over (after the dead one's heartbeat times out) and polls on.
    await expect
      .poll(() => requestsFor(prompt)[0]!.polls, { timeout: 30_000, interval: 200 })
      .toBeGreaterThan(pollsBefore + 2);
    fal.release(requestId);
    const done = await finished(created.id as string);
    expect(done).toMatchObject({ status: 'succeeded', error: null });
    expect(done.output.images[0]).toMatchObject({ width: 1024, height: 768 });
    expect(createsFor(prompt)).toBe(1);
    expect(await ledgerOf(created.id as string)).toMatchObject({ debits: 1, refunds: 0 });
  }, 90_000);

  it('a result URL that expired before it was copied → refunded, generation_failed (never retried)', async () => {
    const prompt = 'gone by morning';
    fal.files.ttlMs = 0; // fal's result files expire at once
    try {
      const before = await balance();
      const created = await post({ model: 'fal-flux-schnell', prompt });
      const done = await finished(created.id as string);
      expect(done).toMatchObject(resultCopyFailed);
      expect(await balance()).toBe(before);
      expect(await ledgerOf(created.id as string)).toMatchObject({ debits: 1, refunds: 1 });
    } finally {
      fal.files.ttlMs = 60 * 60 * 1000;
    }
  });

  it('the provider-wait horizon reached → refunded as timed out, and the request cancelled at fal', async () => {
    const prompt = 'never finishes';
    fal.script({ hold: true }, promptContains(prompt));
    const impatient = await startTestApi(db.url, { ...apiEnv(), PROVIDER_WAIT_HORIZON_MS: '1000' });
    try {
      const created = await post({ model: 'fal-flux-schnell', prompt }, impatient);
      const done = await finished(created.id as string);
      expect(done).toMatchObject(refundedFailure('generation_timed_out'));
      await expect.poll(() => requestsFor(prompt)[0]?.cancelled, { timeout: 10_000 }).toBe(true);
      const { id: requestId } = requestsFor(prompt)[0]!;
      expect(
        fal.requests.some((r) => r.method === 'PUT' && r.url === `/fal-ai/flux/requests/${requestId}/cancel`),
      ).toBe(true);
    } finally {
      await impatient.close();
    }
  });

  describe('a client’s cancel whose answer fal lost: asked again, fal cannot tell, so the job’s end decides', () => {
    const cancel = (id: string) =>
      api.app.inject({ method: 'POST', url: `/v1/generations/${id}/cancel`, headers: bearer(account.key) });
    /** A generation whose request waits in fal's queue until released. */
    const queued = async (prompt: string) => {
      fal.script({ holdInQueue: true }, promptContains(prompt));
      const created = await post({ model: 'fal-flux-schnell', prompt });
      await expect.poll(() => requestsFor(prompt).length).toBe(1);
      return { id: created.id as string, requestId: requestsFor(prompt)[0]!.id };
    };
    const cancelsOf = (requestId: string) =>
      fal.requests.filter((r) => r.method === 'PUT' && r.url.endsWith(`/requests/${requestId}/cancel`))
        .length;

    it('cancelled by the lost call: 200 canceled, refunded once (not a 409 followed by a refund)', async () => {
      const { id, requestId } = await queued('cancel answer lost');
      fal.failCancel({ kind: 'drop', accepted: true });
      const response = await cancel(id);
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toMatchObject({ id, ...refundedFailure('canceled') });
      expect(requestsFor('cancel answer lost')[0]!.cancelled).toBe(true);
      // Asked once: the retry read the status and did not cancel again.
      expect(cancelsOf(requestId)).toBe(1);
      expect(await ledgerOf(id)).toMatchObject({ debits: 1, refunds: 1 });
      expect((await cancel(id)).statusCode).toBe(200);
      expect(await ledgerOf(id)).toMatchObject({ debits: 1, refunds: 1 });
    });

    it('run to completion meanwhile: not canceled, delivered and charged once', async () => {
      const { id, requestId } = await queued('cancel lost, then ran');
      // The cancel fails without reaching fal, and the runner takes the request before the retry.
      fal.failCancel({ kind: 'status', status: 502 }, (request) => fal.release(request));
      const response = await cancel(id);
      expect(response.statusCode, response.body).toBe(409);
      expect(response.json().error.code).toBe('not_cancelable');
      expect(requestsFor('cancel lost, then ran')[0]!.cancelled).toBe(false);
      expect(cancelsOf(requestId)).toBe(1);
      const done = await finished(id);
      expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
      expect(await ledgerOf(id)).toMatchObject({ debits: 1, refunds: 0 });
    });
  });

  it('FAL_KEY is nowhere: not in a generation row, a workflow history, the worker’s logs or the request log', async () => {
    expect(made.length).toBeGreaterThan(8);
    expect(workers.logs()).toContain(taskQueue); // the logs were captured
    expect(workers.logs()).not.toContain(falKey);
    // The histories are read with their payloads decoded: the first one's prompt is in there.
    expect(await decodedHistory(client, db.pool, made[0]!)).toContain('a harbour at dawn');
    expect(await placesHolding(falKey, { pool: db.pool, client, generationIds: made })).toEqual([]);
  });
});
