import { rm } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import sharp from 'sharp';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createLogger } from '../../src/process/logger.js';
import { activityDeps } from '../../src/worker/worker-deps.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { crash, workerProcesses } from '../support/worker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { importExampleCatalog } from '../support/example-catalog.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import {
  accountCalls,
  expectFlaggedForReview,
  placesHolding,
  refundedFailure,
  resultCopyFailed,
} from '../support/provider-lifecycle.js';
import { promptContains } from '../support/providers/fake-http.js';
import { probeVideo } from '../support/providers/probe-video.js';
import { pngDataUri } from '../support/media.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { useGenerationStack, type GenerationStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { chainHistory } from '../support/workflow-runs.js';

/**
 * Generations on Replicate through the real API, workflow and worker, against the local Replicate
 * server, with the models of catalog/examples/replicate.json. The worker's providers are built by
 * worker-deps from configuration, as `npm run worker` builds them.
 */

/** Starts the fake first and hands the stack its configuration (read when the stack starts). */
function useReplicateStack(apiEnv: Record<string, string> = {}) {
  const context = { apiEnv: { ...apiEnv } } as { apiEnv: Record<string, string>; replicate: ReplicateServer };
  beforeAll(async () => {
    context.replicate = await ReplicateServer.start();
    Object.assign(context.apiEnv, context.replicate.env());
  });
  const stack = useGenerationStack({ apiEnv: context.apiEnv });
  beforeAll(async () => {
    const config = loadConfig({
      DATABASE_URL: stack.db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      ...stack.worker.apiEnv,
      ...context.replicate.env(),
      // The fake serves its output files on 127.0.0.1.
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    });
    // The worker's activities use the providers (health tracking and in-flight caps included) as worker-deps builds them.
    const { deps } = activityDeps(config, stack.db.pool, createLogger('worker-test', 'silent'), {
      temporal: () => Promise.resolve(stack.client),
    });
    stack.worker.deps.providerFor = deps.providerFor;
    stack.worker.deps.inFlightCap = deps.inFlightCap;
    await importExampleCatalog(stack.db.pool, 'replicate');
    // The API hears of the new models by NOTIFY, and offers them because the token is configured.
    await waitFor(async () => (await modelIds(stack)).includes('replicate-kling-v3-video'), 10_000);
  });
  afterAll(async () => {
    await context.replicate?.close();
  });
  // The stack's fields are filled in by its hooks; the fake is one more of them.
  return Object.defineProperty(stack, 'replicate', { get: () => context.replicate }) as GenerationStack & {
    replicate: ReplicateServer;
  };
}

async function modelIds(stack: GenerationStack): Promise<string[]> {
  const response = await stack.api.app.inject({
    method: 'GET',
    url: '/v1/models',
    headers: bearer(stack.account.key),
  });
  return (response.json().data as Array<{ id: string }>).map((m) => m.id);
}

/** The creates the fake received whose input's prompt contains `text` (answered or not). */
function createsFor(replicate: ReplicateServer, text: string): number {
  return replicate.requests.filter(
    (r) => r.method === 'POST' && !r.url.endsWith('/cancel') && r.body.includes(text),
  ).length;
}

describe('Replicate generations end to end', () => {
  const stack = useReplicateStack();
  const {
    balance,
    post,
    finished: finish,
    made,
  } = accountCalls(() => ({
    api: stack.api,
    key: stack.account.key,
  }));
  const storedImage = async (url: string) => {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    return sharp(Buffer.from(await response.arrayBuffer())).metadata();
  };

  it('FLUX schnell: one create, succeeded, the stored file of its true size', async () => {
    const created = await post({
      model: 'replicate-flux-schnell',
      prompt: 'a red fox at dawn',
      aspect_ratio: '16:9',
    });
    expect(created).toMatchObject({ status: 'queued', credits: 1 });
    const done = await finish(created.id);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false, error: null });
    expect(done.output.images).toEqual([{ url: expect.any(String), width: 1024, height: 576 }]);
    expect(await storedImage(done.output.images[0].url)).toMatchObject({
      width: 1024,
      height: 576,
      format: 'png',
    });
    const sent = stack.replicate.requests.find((r) => r.body.includes('a red fox at dawn'))!;
    expect(sent.url).toBe('/v1/models/black-forest-labs/flux-schnell/predictions');
    expect(JSON.parse(sent.body)).toEqual({
      input: {
        prompt: 'a red fox at dawn',
        aspect_ratio: '16:9',
        megapixels: '1',
        output_format: 'png',
        num_outputs: 1,
      },
    });
    expect(sent.headers.prefer).toBeUndefined();
    expect(createsFor(stack.replicate, 'a red fox at dawn')).toBe(1);
    expect(await chargesOf(stack.db.pool, created.id)).toMatchObject({ debits: 1, refunds: 0, net: -1 });
  });

  it('Kontext: an inline reference image reaches Replicate as a data URI', async () => {
    const image = await pngDataUri(96, 64);
    const done = await finish(
      (await post({ model: 'replicate-flux-kontext-pro', prompt: 'as a watercolour', images: [image] })).id,
    );
    expect(done.status).toBe('succeeded');
    const prediction = stack.replicate.accepted().find((p) => p.input.prompt === 'as a watercolour')!;
    expect(prediction.model).toBe('black-forest-labs/flux-kontext-pro');
    expect(prediction.input).toMatchObject({ input_image: image, aspect_ratio: 'match_input_image' });
  });

  it('Kling: a pinned version, a first frame, and the stored video measured', async () => {
    stack.replicate.script(
      { outputAsString: true, video: { width: 640, height: 360, durationSeconds: 2 } },
      promptContains('waves on a shore'),
    );
    const created = await post({
      model: 'replicate-kling-v3-video',
      prompt: 'waves on a shore',
      first_frame_image: await pngDataUri(320, 180),
    });
    expect(created.credits).toBe(60);
    const done = await finish(created.id);
    expect(done.status).toBe('succeeded');
    expect(done.output.videos[0]).toMatchObject({ width: 640, height: 360, content_type: 'video/mp4' });
    const bytes = Buffer.from(await (await fetch(done.output.videos[0].url)).arrayBuffer());
    expect(await probeVideo(bytes)).toMatchObject({ width: 640, height: 360 });
    const sent = stack.replicate.requests.find((r) => r.body.includes('waves on a shore'))!;
    expect(sent.url).toBe('/v1/predictions');
    const body = JSON.parse(sent.body);
    expect(body.version).toBe(
      'kwaivgi/kling-v3-video:4a8ba2743bd9dc2b487e0c4319988aacd658d33c2d064b8a420f4ee1732c30bd',
    );
    expect(body.input).toMatchObject({ mode: 'standard', duration: 5, generate_audio: false });
    expect(body.input.start_image).toMatch(/^data:image\/png;base64,/);
  });

  it('a 422 is a rejection: refunded, provider_rejected, already in the 202', async () => {
    const before = await balance();
    stack.replicate.failCreate(
      {
        kind: 'status',
        status: 422,
        body: { title: 'Input validation failed', detail: `bad key ${stack.replicate.token}`, status: 422 },
      },
      promptContains('refused sketch'),
    );
    const answered = await post({ model: 'replicate-flux-1.1-pro', prompt: 'a refused sketch' });
    expect(answered).toMatchObject({ ...refundedFailure('provider_rejected'), credits: 4 });
    expect(await balance()).toBe(before);
    expect(await chargesOf(stack.db.pool, answered.id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    expect(createsFor(stack.replicate, 'refused sketch')).toBe(1);
  });

  it('a prediction that fails later: refunded exactly once, generation_failed, a message safe to show', async () => {
    const before = await balance();
    stack.replicate.script(
      {
        final: 'failed',
        error: `CUDA out of memory\n  at https://weights.example.test/x?sig=abc (for ${stack.replicate.token})`,
      },
      promptContains('a heavy scene'),
    );
    const done = await finish((await post({ model: 'replicate-flux-schnell', prompt: 'a heavy scene' })).id);
    expect(done).toMatchObject({
      ...refundedFailure(
        'generation_failed',
        'The model failed: CUDA out of memory at [url] (for [redacted])',
      ),
      output: null,
    });
    expect(await balance()).toBe(before);
    expect(await chargesOf(stack.db.pool, done.id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
  });

  it('canceled and aborted predictions end failed and refunded too', async () => {
    stack.replicate.script({ final: 'canceled' }, promptContains('cancelled elsewhere'));
    stack.replicate.script({ final: 'aborted' }, promptContains('aborted early'));
    const canceled = await post({ model: 'replicate-flux-schnell', prompt: 'cancelled elsewhere' });
    const aborted = await post({ model: 'replicate-flux-schnell', prompt: 'aborted early' });
    expect(await finish(canceled.id)).toMatchObject(
      refundedFailure('generation_failed', 'The prediction was canceled at the provider.'),
    );
    expect(await finish(aborted.id)).toMatchObject(
      refundedFailure('generation_failed', 'The prediction was aborted at the provider before it started.'),
    );
  });

  it('a create whose answer is lost: review, nothing refunded, one create (Replicate cannot be asked by our token)', async () => {
    const before = await balance();
    stack.replicate.failCreate({ kind: 'drop' }, promptContains('lost in transit'));
    const answered = await post({ model: 'replicate-flux-schnell', prompt: 'lost in transit' });
    expect(answered).toMatchObject({
      status: 'failed',
      credits: 1,
      credits_refunded: false,
      error: { code: 'submission_unresolved' },
    });
    expect(await balance()).toBe(before - 1);
    await expectFlaggedForReview(stack.client, stack.db.pool, answered.id);
    expect(createsFor(stack.replicate, 'lost in transit')).toBe(1);
    // Replicate does have it: support finds it in Replicate's dashboard and resolves the generation.
    expect(stack.replicate.accepted().filter((p) => p.input.prompt === 'lost in transit')).toHaveLength(1);
    expect(await chargesOf(stack.db.pool, answered.id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('429s with Retry-After, on the create and on a poll, are ridden out: succeeded, one prediction', async () => {
    stack.replicate.failCreate({ kind: 'status', status: 429, retryAfter: 1 }, promptContains('a busy day'));
    stack.replicate.failCreate({ kind: 'status', status: 429, retryAfter: 1 }, promptContains('a busy day'));
    // Nothing else is polled meanwhile: the first poll of this prediction is throttled.
    stack.replicate.failPolls({ kind: 'status', status: 429, retryAfter: 1 });
    const created = await post({ model: 'replicate-flux-schnell', prompt: 'a busy day' });
    expect(created).toMatchObject({ status: 'queued', credits_refunded: false });
    const done = await finish(created.id);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(createsFor(stack.replicate, 'a busy day')).toBe(3);
    const polls = stack.replicate.requests.filter(
      (r) => r.method === 'GET' && r.url.startsWith('/v1/predictions/'),
    );
    expect(polls.length).toBeGreaterThan(1);
    expect(stack.replicate.accepted().filter((p) => p.input.prompt === 'a busy day')).toHaveLength(1);
    expect(await chargesOf(stack.db.pool, created.id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('an output URL that expired before it was copied: refunded, generation_failed (it can never be fetched)', async () => {
    const ttl = stack.replicate.files.ttlMs;
    stack.replicate.files.ttlMs = 0;
    try {
      const done = await finish((await post({ model: 'replicate-flux-schnell', prompt: 'too late' })).id);
      expect(done).toMatchObject(resultCopyFailed);
      expect(await chargesOf(stack.db.pool, done.id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    } finally {
      stack.replicate.files.ttlMs = ttl;
    }
  });

  it('the Replicate token appears in no generation, workflow history or request log', async () => {
    const token = stack.replicate.token;
    expect(made.length).toBeGreaterThanOrEqual(10);
    expect(
      await placesHolding(token, { pool: stack.db.pool, client: stack.client, generationIds: made }),
    ).toEqual([]);
    // The fake's own log of requests keeps no secret either.
    expect(JSON.stringify(stack.replicate.requests)).not.toContain(token);
  });
});

describe('Replicate: a prediction that outlives the provider-wait horizon', () => {
  const stack = useReplicateStack({ PROVIDER_WAIT_HORIZON_MS: '2000' });

  it('is given up on: refunded, generation_timed_out, and canceled at Replicate', async () => {
    stack.replicate.script({ hold: true }, promptContains('an endless render'));
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'replicate-flux-schnell',
      prompt: 'an endless render',
    });
    expect(response.statusCode).toBe(202);
    const done = await pollGeneration(stack.api, stack.account.key, response.json().id, undefined, 30_000);
    expect(done).toMatchObject(refundedFailure('generation_timed_out'));
    const prediction = stack.replicate.accepted().find((p) => p.input.prompt === 'an endless render')!;
    await expect.poll(() => stack.replicate.statusOf(prediction.id), { timeout: 10_000 }).toBe('canceled');
    expect(stack.replicate.requests.some((r) => r.url === `/v1/predictions/${prediction.id}/cancel`)).toBe(
      true,
    );
  });
});

/** The real worker process (`npm run worker`) on Replicate, killed with SIGKILL while the prediction runs. */
describe('Replicate: a worker killed mid-generation', () => {
  let replicate: ReplicateServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  const taskQueue = `replicate-crash-${randomBase62(8)}`;
  const workers = workerProcesses(() => ({
    ...replicate.env(),
    DATABASE_URL: db.url,
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: `/tmp/replicate-crash-${taskQueue}`,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    LOG_LEVEL: 'debug',
  }));
  const startWorker = () => workers.start();

  beforeAll(async () => {
    replicate = await ReplicateServer.start();
    db = await createTestDatabase();
    await importExampleCatalog(db.pool, 'replicate');
    api = await startTestApi(db.url, {
      ...replicate.env(),
      TEMPORAL_TASK_QUEUE: taskQueue,
      PROVIDER_POLL_INTERVAL_MS: '100',
    });
    account = await createPaidAccount(db.pool, { oneTime: 20 });
  });
  afterAll(async () => {
    workers.killAll();
    await rm(`/tmp/replicate-crash-${taskQueue}`, { recursive: true, force: true });
    await api?.close();
    await db?.drop();
    await replicate?.close();
  });

  it('resumes without a second create and succeeds; the token is in none of its logs', async () => {
    replicate.script({ hold: true }, promptContains('survive the crash'));
    const first = await startWorker();
    const response = await createGeneration(api, account.key, {
      model: 'replicate-flux-schnell',
      prompt: 'survive the crash',
    });
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    // The job id is recorded and the worker is polling it: kill the worker outright.
    await expect
      .poll(
        () =>
          db.pool.maybeOneFirst(
            sql.type(z.object({ provider_job_id: z.string().nullable() }))`
              SELECT provider_job_id FROM generations WHERE id = ${id}`,
          ),
        { timeout: 10_000 },
      )
      .toMatch(/^replicate:/);
    const [prediction] = replicate.accepted();
    await expect.poll(() => replicate.statusOf(prediction!.id), { timeout: 10_000 }).toBe('processing');
    await crash(first);

    replicate.release(prediction!.id);
    await startWorker();
    const done = await pollGeneration(api, account.key, id, (g) => g.status !== 'queued', 90_000);
    expect(done).toMatchObject({ status: 'succeeded', output: { images: [{ width: 1024, height: 1024 }] } });
    expect(replicate.creates).toBe(1);
    expect(replicate.accepted()).toHaveLength(1);
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0, net: -1 });
    expect(workers.logs()).toContain('worker running');
    expect(workers.logs()).not.toContain(replicate.token);
    const handle = new Client({
      connection: await Connection.connect({ address: inject('temporalAddress') }),
    });
    const history = await chainHistory(handle, await workflowIdOf(db.pool, id));
    expect(JSON.stringify(history)).not.toContain(replicate.token);
    await handle.connection.close();
  }, 150_000);
});
