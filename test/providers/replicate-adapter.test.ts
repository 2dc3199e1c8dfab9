import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import {
  ProviderRejection,
  ProviderResultGone,
  ProviderTransientError,
  ProviderUncertainError,
  type ProviderJob,
  type ProviderTarget,
} from '../../src/providers/provider.js';
import {
  maxDataUriBytes,
  ReplicateProvider,
  type ReplicateProviderOptions,
} from '../../src/providers/replicate/replicate-provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { drawImage } from '../support/providers/fake-files.js';
import { promptContains } from '../support/providers/fake-http.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { resultBytes } from '../support/providers/result-content.js';

/** The Replicate adapter against the local Replicate server: what it sends, and how it reads the answers. */
describe('ReplicateProvider', () => {
  let replicate: ReplicateServer;
  let storage: LocalStorage;
  let storageDir: string;
  let provider: ReplicateProvider;
  const resultBaseUrl = 'https://results.example.test';

  const make = (options: Partial<ReplicateProviderOptions> = {}) =>
    new ReplicateProvider({
      apiUrl: replicate.env().REPLICATE_API_URL!,
      token: replicate.token,
      storage,
      download: { allowCidrs: ['127.0.0.1/32'], allowHttp: true },
      cancelAfterMs: 6 * 3_600_000 + 15 * 60_000,
      ...options,
    });
  const job = (target: ProviderTarget): ProviderJob => ({
    token: 'tok_gen_test',
    model: 'replicate-test',
    mediaType: 'image',
    prompt: String(target.input.prompt),
    options: {},
    images: [],
    longEdgePx: 1024,
    // As the catalog's mapping declares them: the fields taken from `images` or an image option.
    target: { referenceFields: ['input_image', 'images'], ...target },
  });
  const schnell = (input: Record<string, unknown>): ProviderTarget => ({
    model: 'black-forest-labs/flux-schnell',
    input: { prompt: 'a fox', ...input },
  });
  /** Polls until the prediction is no longer running. */
  const finish = async (jobId: string) => {
    for (let i = 0; i < 20; i++) {
      const status = await provider.status(jobId);
      if (status.state !== 'running') return status;
    }
    throw new Error(`prediction ${jobId} still running`);
  };
  const creates = () => replicate.requests.filter((r) => r.method === 'POST' && !r.url.endsWith('/cancel'));
  const lastCreate = () => creates().at(-1)!;

  beforeAll(async () => {
    replicate = await ReplicateServer.start();
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'replicate-adapter-'));
    storage = new LocalStorage(storageDir, resultBaseUrl);
    provider = make();
  });
  afterAll(async () => {
    await replicate.close();
    await rm(storageDir, { recursive: true, force: true });
  });

  it('creates an official model prediction with its input, our token and a deadline; no Prefer: wait', async () => {
    const { jobId } = await provider.submit(job(schnell({ aspect_ratio: '16:9', num_outputs: 1 })));
    const sent = lastCreate();
    expect(sent.url).toBe('/v1/models/black-forest-labs/flux-schnell/predictions');
    expect(JSON.parse(sent.body)).toEqual({
      input: { prompt: 'a fox', aspect_ratio: '16:9', num_outputs: 1 },
    });
    expect(sent.headers.authorization).toBe('Bearer [redacted]');
    expect(sent.headers['cancel-after']).toBe('6h15m');
    expect(sent.headers.prefer).toBeUndefined();
    expect(replicate.accepted().map((p) => p.id)).toContain(jobId);
  });

  it('creates by version on POST /predictions when the catalog pins one', async () => {
    const { jobId } = await provider.submit(
      job({ model: 'kwaivgi/kling-v3-video', version: 'v123', input: { prompt: 'waves' } }),
    );
    const sent = lastCreate();
    expect(sent.url).toBe('/v1/predictions');
    expect(JSON.parse(sent.body)).toEqual({
      version: 'kwaivgi/kling-v3-video:v123',
      input: { prompt: 'waves' },
    });
    expect(replicate.accepted().find((p) => p.id === jobId)?.model).toBe('kwaivgi/kling-v3-video');
  });

  it('pushes: a job with a webhook URL is created with it and the "completed" filter, on either endpoint', async () => {
    expect(provider.pushes).toBe(true);
    const webhookUrl = 'https://api.example.test/provider-webhooks/replicate/gen_123';
    await provider.submit({ ...job(schnell({})), webhookUrl });
    expect(JSON.parse(lastCreate().body)).toEqual({
      input: { prompt: 'a fox' },
      webhook: webhookUrl,
      webhook_events_filter: ['completed'],
    });
    await provider.submit({
      ...job({ model: 'kwaivgi/kling-v3-video', version: 'v123', input: { prompt: 'waves' } }),
      webhookUrl,
    });
    expect(JSON.parse(lastCreate().body)).toEqual({
      version: 'kwaivgi/kling-v3-video:v123',
      input: { prompt: 'waves' },
      webhook: webhookUrl,
      webhook_events_filter: ['completed'],
    });
    // Without a URL (no PROVIDER_WEBHOOK_BASE_URL), neither field is sent (the two tests above).
    await provider.submit(job(schnell({})));
    expect(Object.keys(JSON.parse(lastCreate().body))).toEqual(['input']);
  });

  it('sends our small stored images as data URIs, large ones as our URL, and other URLs as given', async () => {
    const small = await drawImage(64, 48, 'png');
    const noise = await sharp(randomBytes(420 * 420 * 3), { raw: { width: 420, height: 420, channels: 3 } })
      .png()
      .toBuffer();
    expect(noise.length).toBeGreaterThan(maxDataUriBytes);
    const smallUrl = await storage.put('iabc', 'images-0.png', small);
    const largeUrl = await storage.put('iabc', 'images-1.png', noise);
    const elsewhere = 'https://images.example.test/cat.png';
    await provider.submit(
      job({
        model: 'black-forest-labs/flux-kontext-pro',
        input: { prompt: 'edit', input_image: smallUrl, images: [smallUrl, largeUrl, elsewhere] },
      }),
    );
    const input = JSON.parse(lastCreate().body).input;
    const smallData = `data:image/png;base64,${small.toString('base64')}`;
    expect(input).toEqual({
      prompt: 'edit',
      input_image: smallData,
      images: [smallData, largeUrl, elsewhere],
    });
  });

  it('a reference image we no longer have is a rejection, and nothing is sent', async () => {
    const before = replicate.creates;
    const gone = `${resultBaseUrl}/iabc/missing.png`;
    await expect(provider.submit(job(schnell({ input_image: gone })))).rejects.toBeInstanceOf(
      ProviderRejection,
    );
    expect(replicate.creates).toBe(before);
  });

  it('reads a run to the end: starting and processing are running, succeeded gives its files by URL', async () => {
    const { jobId } = await provider.submit(job(schnell({ aspect_ratio: '16:9', num_outputs: 2 })));
    expect(await provider.status(jobId)).toEqual({ state: 'running' });
    expect(replicate.statusOf(jobId)).toBe('starting');
    expect(await provider.status(jobId)).toEqual({ state: 'running' });
    const done = await provider.status(jobId);
    expect(done).toMatchObject({
      state: 'succeeded',
      results: [
        { width: 0, height: 0, contentType: 'image/png', url: expect.stringMatching(/\/files\/.+\.png$/) },
        { width: 0, height: 0, contentType: 'image/png' },
      ],
    });
    if (done.state !== 'succeeded') throw new Error('not succeeded');
    const file = await resultBytes(await provider.fetchResult(jobId, 1, done.results[1]!));
    expect(file.contentType).toBe('image/png');
    expect(await sharp(file.bytes).metadata()).toMatchObject({ width: 1024, height: 576 });
  });

  it('reads an output that is one URL (a video model)', async () => {
    replicate.script(
      { outputAsString: true, video: { width: 640, height: 360, durationSeconds: 1 } },
      promptContains('clip'),
    );
    const { jobId } = await provider.submit(job(schnell({ prompt: 'a clip' })));
    const done = await finish(jobId);
    expect(done).toMatchObject({ state: 'succeeded', results: [{ contentType: 'video/mp4' }] });
    if (done.state !== 'succeeded') throw new Error('not succeeded');
    const file = await resultBytes(await provider.fetchResult(jobId, 0, done.results[0]!));
    expect(file.contentType).toBe('video/mp4');
    expect(file.bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
  });

  it('an expired output URL is gone for good', async () => {
    const { jobId } = await provider.submit(job(schnell({ prompt: 'fleeting' })));
    const done = await finish(jobId);
    if (done.state !== 'succeeded') throw new Error('not succeeded');
    replicate.files.expire(done.results[0]!.url);
    await expect(provider.fetchResult(jobId, 0, done.results[0]!)).rejects.toBeInstanceOf(ProviderResultGone);
  });

  it('failed, canceled and aborted predictions end failed, with a message that is safe to show', async () => {
    replicate.script(
      {
        final: 'failed',
        error: `NSFW content detected\u0000 see https://replicate.delivery/secret?sig=abc; credential ${'r8_test_token'}`,
      },
      promptContains('[failed]'),
    );
    replicate.script({ final: 'canceled' }, promptContains('[canceled]'));
    replicate.script({ final: 'aborted' }, promptContains('[aborted]'));
    const outcomes = [];
    for (const marker of ['[failed]', '[canceled]', '[aborted]']) {
      const { jobId } = await provider.submit(job(schnell({ prompt: `x ${marker}` })));
      outcomes.push(await finish(jobId));
    }
    expect(outcomes).toEqual([
      { state: 'failed', message: 'The model failed: NSFW content detected see [url] credential [redacted]' },
      // It ran before it was canceled (started_at set): billed, which a client's cancel must know.
      {
        state: 'failed',
        message: 'The prediction was canceled at the provider.',
        canceledWhileRunning: true,
      },
      // Never started: nothing ran or bills, so a routed generation may try its next route.
      {
        state: 'failed',
        message: 'The prediction was aborted at the provider before it started.',
        neverStarted: true,
      },
    ]);
  });

  it('classifies a refused create, a throttled one and a lost answer; each is one request, never resent', async () => {
    replicate.failCreate({ kind: 'status', status: 422 }, promptContains('[422]'));
    replicate.failCreate({ kind: 'status', status: 429, retryAfter: 2 }, promptContains('[429]'));
    replicate.failCreate({ kind: 'drop' }, promptContains('[drop]'));
    replicate.failCreate({ kind: 'status', status: 500, accepted: true }, promptContains('[500]'));
    const attempt = async (marker: string) => {
      const before = replicate.creates;
      const error = await provider.submit(job(schnell({ prompt: `x ${marker}` }))).catch((e: unknown) => e);
      expect(replicate.creates - before).toBe(1);
      return error as Error;
    };
    const rejected = await attempt('[422]');
    expect(rejected).toBeInstanceOf(ProviderRejection);
    expect(rejected.message).toMatch(/HTTP 422.*input\.prompt: Invalid/);
    const throttled = await attempt('[429]');
    expect(throttled).toBeInstanceOf(ProviderTransientError);
    expect((throttled as ProviderTransientError).retryAfterMs).toBe(2000);
    expect(await attempt('[drop]')).toBeInstanceOf(ProviderUncertainError);
    expect(await attempt('[500]')).toBeInstanceOf(ProviderUncertainError);
  });

  it('a create that never connected is transient: nothing was sent', async () => {
    const closed = make({ apiUrl: `http://127.0.0.1:${await freePort()}/v1` });
    await expect(closed.submit(job(schnell({})))).rejects.toBeInstanceOf(ProviderTransientError);
  });

  it('a throttled poll is transient after its Retry-After', async () => {
    const { jobId } = await provider.submit(job(schnell({ prompt: 'patient' })));
    replicate.failPolls({ kind: 'status', status: 429, retryAfter: 3 });
    const error = await provider.status(jobId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderTransientError);
    expect((error as ProviderTransientError).retryAfterMs).toBe(3000);
    expect(await finish(jobId)).toMatchObject({ state: 'succeeded' });
  });

  it('cancels a running prediction; a finished or unknown one is fine', async () => {
    replicate.script({ hold: true }, promptContains('[hold]'));
    const { jobId } = await provider.submit(job(schnell({ prompt: 'long [hold]' })));
    await provider.cancel(jobId);
    expect(replicate.statusOf(jobId)).toBe('canceled');
    expect(replicate.requests.at(-1)).toMatchObject({
      method: 'POST',
      url: `/v1/predictions/${jobId}/cancel`,
    });
    await provider.cancel(jobId);
    await provider.cancel('no-such-prediction');
    expect(await provider.status(jobId)).toMatchObject({ state: 'failed' });
  });

  it('probes with GET /account: up with our token; refused credentials or no connection are not', async () => {
    await provider.probe();
    expect(replicate.requests.at(-1)).toMatchObject({ method: 'GET', url: '/v1/account' });
    await expect(make({ token: 'r8_not_the_token' }).probe()).rejects.toBeInstanceOf(ProviderTransientError);
    const closed = make({ apiUrl: `http://127.0.0.1:${await freePort()}/v1` });
    await expect(closed.probe()).rejects.toBeInstanceOf(ProviderTransientError);
  });

  it('lookup cannot tell (Replicate has no field for our token) and asks nothing', async () => {
    const before = replicate.requests.length;
    expect(await provider.lookup('tok_gen_test')).toEqual({ found: 'unknown' });
    expect(replicate.requests.length).toBe(before);
  });

  it('never puts the token in an error, and keeps it off the instance', async () => {
    const wrong = make({ token: 'r8_not_the_token' });
    const error = (await wrong.status('abc').catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(ProviderTransientError);
    expect(error.message).toMatch(/refused our credentials/);
    replicate.failCreate(
      { kind: 'status', status: 400, body: { detail: `bad request from r8_test_token` } },
      promptContains('[echo]'),
    );
    const echoed = (await provider
      .submit(job(schnell({ prompt: '[echo]' })))
      .catch((e: unknown) => e)) as Error;
    expect(echoed).toBeInstanceOf(ProviderRejection);
    expect(echoed.message).not.toContain(replicate.token);
    expect(JSON.stringify(provider)).not.toContain(replicate.token);
    expect(String(Object.values(provider))).not.toContain(replicate.token);
  });
});
