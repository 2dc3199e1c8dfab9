import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { imageSize } from 'image-size';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FalQueueProvider } from '../../src/providers/fal/fal-queue-provider.js';
import {
  CustomerInputRejection,
  ProviderRejection,
  ProviderResultGone,
  ProviderTransientError,
  ProviderUncertainError,
  type ProviderJob,
  type ProviderStatus,
} from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { drawImage } from '../support/providers/fake-files.js';
import {
  FalQueueServer,
  falRequestError,
  falValidationError,
} from '../support/providers/fal-queue-server.js';
import { resultBytes } from '../support/providers/result-content.js';
import { pngClaiming } from '../support/test-servers.js';

/** The fal queue adapter against the local fal queue, one call at a time. */
describe('FalQueueProvider', () => {
  const key = 'fal-adapter-secret-3f9c1d';
  let fal: FalQueueServer;
  let storage: LocalStorage;
  let storageDir: string;
  let adapter: FalQueueProvider;
  const download = { allowCidrs: ['127.0.0.1/32'], allowHttp: true };

  beforeAll(async () => {
    fal = await FalQueueServer.start({ key });
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'fal-adapter-'));
    // Our result host: never reachable here, so an image of ours can only reach fal inlined.
    storage = new LocalStorage(storageDir, 'http://127.0.0.1:9/results');
    adapter = new FalQueueProvider({ key, queueUrl: fal.origin, storage, download, createTimeoutMs: 500 });
  });
  afterAll(async () => {
    await fal?.close();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const job = (input: Record<string, unknown>, model = 'fal-ai/flux/dev'): ProviderJob => ({
    token: `tok_${Math.random()}`,
    model: 'fal-flux-dev',
    mediaType: 'image',
    prompt: typeof input.prompt === 'string' ? input.prompt : '',
    options: {},
    images: [],
    longEdgePx: 1024,
    // As the catalog's mapping declares them: the fields taken from `images` or an image option.
    target: { model, input, referenceFields: ['image_url', 'image_urls'] },
  });
  /** Polls until the request is no longer running, as the provider wait does. */
  const settle = async (jobId: string): Promise<Exclude<ProviderStatus, { state: 'running' }>> => {
    for (let polls = 0; polls < 20; polls++) {
      const status = await adapter.status(jobId);
      if (status.state !== 'running') return status;
    }
    throw new Error(`${jobId} still running`);
  };
  const resultsOf = (status: ProviderStatus) => (status.state === 'succeeded' ? status.results : []);
  const creates = async <T>(work: () => Promise<T>): Promise<{ made: number; outcome: T | Error }> => {
    const before = fal.creates;
    const outcome = await work().catch((error: Error) => error);
    return { made: fal.creates - before, outcome };
  };

  it('submits once with the key, polls the owner/app URLs, and hands over files of the true size', async () => {
    const input = { prompt: 'a lighthouse', image_size: { width: 320, height: 200 }, num_images: 2 };
    const { jobId } = await adapter.submit(job(input));
    const [model, requestId] = jobId.split('::');
    expect(model).toBe('fal-ai/flux/dev');
    const create = fal.requests.find((r) => r.method === 'POST' && r.url === '/fal-ai/flux/dev')!;
    expect(create.headers.authorization).toBe('Key [redacted]');
    expect(JSON.parse(create.body)).toEqual(input);
    expect(fal.accepted().find((j) => j.id === requestId)?.endpoint).toBe('fal-ai/flux/dev');

    const done = await settle(jobId);
    expect(done.state).toBe('succeeded');
    const results = resultsOf(done);
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ width: 320, height: 200, contentType: 'image/png' });
    const { bytes, contentType } = await resultBytes(await adapter.fetchResult(jobId, 0, results[0]!));
    expect(contentType).toBe('image/png');
    expect(imageSize(bytes)).toMatchObject({ width: 320, height: 200 });
    // Status and result were read under fal-ai/flux (no /dev), with the key.
    const reads = fal.requests.filter((r) => r.url.includes(requestId!));
    expect(reads.map((r) => `${r.method} ${r.url}`)).toEqual([
      ...Array(3).fill(`GET /fal-ai/flux/requests/${requestId}/status`),
      `GET /fal-ai/flux/requests/${requestId}`,
    ]);
    expect(reads.every((r) => r.headers.authorization === 'Key [redacted]')).toBe(true);
  });

  it('pushes: a job with a webhook URL is enqueued with it as fal_webhook, and without one, nothing is added', async () => {
    expect(adapter.pushes).toBe(true);
    const webhookUrl = 'https://api.example.test/provider-webhooks/fal/gen_a?b&c';
    const { jobId } = await adapter.submit({ ...job({ prompt: 'pushed' }), webhookUrl });
    const create = fal.requests.filter((r) => r.method === 'POST').at(-1)!;
    const url = new URL(create.url, fal.origin);
    expect(url.pathname).toBe('/fal-ai/flux/dev');
    expect([...url.searchParams]).toEqual([['fal_webhook', webhookUrl]]);
    expect(JSON.parse(create.body)).toEqual({ prompt: 'pushed' });
    // The job id is built as for any create: status and result are read as before.
    expect((await settle(jobId)).state).toBe('succeeded');

    await adapter.submit(job({ prompt: 'not pushed' }));
    expect(fal.requests.filter((r) => r.method === 'POST').at(-1)!.url).toBe('/fal-ai/flux/dev');
  });

  it('reads a video model’s result as one video', async () => {
    fal.script({
      pollsInQueue: 0,
      pollsInProgress: 0,
      video: { width: 320, height: 240, durationSeconds: 1 },
    });
    const { jobId } = await adapter.submit(
      job(
        { prompt: 'waves', image_url: 'https://example.com/a.png' },
        'fal-ai/kling-video/v2.5-turbo/pro/image-to-video',
      ),
    );
    const done = await settle(jobId);
    expect(done).toMatchObject({ state: 'succeeded', results: [{ contentType: 'video/mp4' }] });
    const file = await adapter.fetchResult(jobId, 0, resultsOf(done)[0]!);
    expect(file.contentType).toBe('video/mp4');
  });

  it('sends our stored images in the reference fields as data URIs; a URL anywhere else is text', async () => {
    const png = await drawImage(16, 12);
    const ours = await storage.put('in0123456789', 'image-0.png', png);
    const theirs = 'https://images.example.com/b.png';
    const { jobId } = await adapter.submit(
      job({
        prompt: ours,
        image_url: ours,
        image_urls: [theirs, ours],
        nested: { frames: [{ url: ours }] },
        strength: 0.5,
      }),
    );
    const sent = fal.accepted().find((j) => j.id === jobId.split('::')[1])!.input;
    const inline = `data:image/png;base64,${png.toString('base64')}`;
    expect(sent).toEqual({
      prompt: ours,
      image_url: inline,
      image_urls: [theirs, inline],
      nested: { frames: [{ url: ours }] },
      strength: 0.5,
    });
  });

  it('refuses, without reading it whole or a create, a file of ours that is no reference image', async () => {
    // An earlier video result, a file past 10 MiB (sized before it is read), a pixel bomb.
    const video = await storage.put('r0123456789', 'output-0.mp4', Buffer.alloc(64 * 1024));
    const huge = await storage.put('in0123456789', 'huge.png', Buffer.alloc(10 * 1024 * 1024 + 1));
    const bomb = await storage.put('in0123456789', 'bomb.png', pngClaiming(20_000, 20_000));
    for (const url of [video, huge, bomb]) {
      const { made, outcome } = await creates(() => adapter.submit(job({ prompt: 'x', image_urls: [url] })));
      expect(outcome).toBeInstanceOf(CustomerInputRejection);
      expect(made).toBe(0);
    }
  });

  it('refuses, without a create, a stored image that is gone', async () => {
    const gone = storage.urlFor('in0123456789', 'missing.png');
    const { made, outcome } = await creates(() => adapter.submit(job({ prompt: 'x', image_url: gone })));
    expect(outcome).toBeInstanceOf(ProviderRejection);
    expect(made).toBe(0);
  });

  it('classifies a failed create, and never sends it twice', async () => {
    fal.failCreate({ kind: 'status', status: 422 });
    let { made, outcome } = await creates(() => adapter.submit(job({ prompt: 'invalid' })));
    expect([made, (outcome as Error).name]).toEqual([1, 'ProviderRejection']);
    expect((outcome as Error).message).toContain('Invalid input');

    fal.failCreate({ kind: 'status', status: 429, retryAfter: 3 });
    ({ made, outcome } = await creates(() => adapter.submit(job({ prompt: 'busy' }))));
    expect(made).toBe(1);
    expect(outcome).toBeInstanceOf(ProviderTransientError);
    expect((outcome as ProviderTransientError).retryAfterMs).toBe(3000);

    for (const fault of [{ kind: 'hang' }, { kind: 'drop' }, { kind: 'status', status: 502 }] as const) {
      fal.failCreate(fault);
      ({ made, outcome } = await creates(() => adapter.submit(job({ prompt: `lost ${fault.kind}` }))));
      expect([fault.kind, made, (outcome as Error).name]).toEqual([fault.kind, 1, 'ProviderUncertainError']);
    }
    expect(outcome).toBeInstanceOf(ProviderUncertainError);
  });

  it('reads a request COMPLETED with an error as failed, in a message that holds no URL and no key', async () => {
    fal.script({
      pollsInQueue: 0,
      pollsInProgress: 0,
      error: falRequestError(
        'runner_disconnected',
        503,
        `Runner lost fetching https://cdn.example/x.png?X-Amz-Signature=abc (Key ${key})`,
      ),
    });
    const { jobId } = await adapter.submit(job({ prompt: 'flaky' }));
    const done = await settle(jobId);
    expect(done).toMatchObject({ state: 'failed' });
    expect(done).not.toHaveProperty('rejected');
    const message = (done as { message: string }).message;
    expect(message).toContain('runner_disconnected');
    expect(message).not.toContain(key);
    expect(message).not.toMatch(/https?:|X-Amz/);
  });

  it('reads a model’s validation error (422) on the result as a rejection of the input', async () => {
    fal.script({
      pollsInQueue: 0,
      pollsInProgress: 0,
      error: falValidationError('image_url', 'Unsupported image format'),
    });
    const { jobId } = await adapter.submit(job({ prompt: 'bad image' }));
    expect(await settle(jobId)).toEqual({
      state: 'failed',
      rejected: true,
      message: 'fal refused the input: image_url: Unsupported image format.',
    });
  });

  it('retries reads through fal’s hiccups rather than failing the job', async () => {
    fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
    const { jobId } = await adapter.submit(job({ prompt: 'hiccup' }));
    // A COMPLETED status played by hand, so that the next fault meets the result call.
    const completed = { kind: 'status', status: 200, body: { status: 'COMPLETED' } } as const;
    fal.failPolls({ kind: 'status', status: 500 });
    await expect(adapter.status(jobId)).rejects.toBeInstanceOf(ProviderTransientError);
    // A plain 500 on the result, without fal's error shape, is a failed read, not the request's outcome.
    fal.failPolls(completed, { kind: 'status', status: 500 });
    await expect(adapter.status(jobId)).rejects.toBeInstanceOf(ProviderTransientError);
    fal.failPolls(completed, { kind: 'status', status: 429, retryAfter: 2 });
    const throttled = await adapter.status(jobId).catch((error: Error) => error);
    expect(throttled).toBeInstanceOf(ProviderTransientError);
    expect((throttled as ProviderTransientError).retryAfterMs).toBe(2000);
    expect(await settle(jobId)).toMatchObject({ state: 'succeeded' });
  });

  it('a 2xx result that is not JSON (a proxy’s page, empty, cut short) is a failed read, never “no image”', async () => {
    fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
    const { jobId } = await adapter.submit(job({ prompt: 'unreadable' }));
    const completed = { kind: 'status', status: 200, body: { status: 'COMPLETED' } } as const;
    for (const [contentType, body] of [
      ['text/html', '<html><body>502 Bad Gateway</body></html>'],
      ['application/json', ''],
      ['application/json', '{"images": [{"url": "https://v3.fal.media/files/'],
    ]) {
      fal.failPolls(completed, { kind: 'raw', status: 200, contentType: contentType!, body: body! });
      await expect(adapter.status(jobId)).rejects.toBeInstanceOf(ProviderTransientError);
    }
    expect(await settle(jobId)).toMatchObject({ state: 'succeeded' });
  });

  it('a 404 on status right after the enqueue is “not visible yet”: running, and failed only past the grace', async () => {
    fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
    const notFound = { kind: 'status', status: 404, body: { detail: 'Request not found' } } as const;
    const { jobId } = await adapter.submit(job({ prompt: 'eventually consistent' }));
    fal.failPolls(notFound);
    expect(await adapter.status(jobId)).toEqual({ state: 'running' });
    expect(await settle(jobId)).toMatchObject({ state: 'succeeded' });
    // Past the grace (none here), or for a job id recorded before enqueue times were kept: gone.
    const impatient = new FalQueueProvider({
      key,
      queueUrl: fal.origin,
      storage,
      download,
      unknownGraceMs: 0,
    });
    const [model, requestId] = jobId.split('::');
    fal.failPolls(notFound);
    expect(await impatient.status(jobId)).toMatchObject({ state: 'failed' });
    fal.failPolls(notFound);
    expect(await adapter.status(`${model}::${requestId}`)).toMatchObject({ state: 'failed' });
  });

  it('says a result whose URL expired is gone for good', async () => {
    fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
    const { jobId } = await adapter.submit(job({ prompt: 'too late' }));
    const [result] = resultsOf(await settle(jobId));
    expect((await resultBytes(await adapter.fetchResult(jobId, 0, result!))).bytes.length).toBeGreaterThan(0);
    fal.files.expire(result!.url);
    await expect(adapter.fetchResult(jobId, 0, result!)).rejects.toBeInstanceOf(ProviderResultGone);
  });

  it('cancels a queued request, and takes a finished or unknown one calmly', async () => {
    fal.script({ pollsInQueue: 50 });
    const { jobId } = await adapter.submit(job({ prompt: 'never mind' }));
    await adapter.cancel(jobId);
    const requestId = jobId.split('::')[1]!;
    expect(fal.accepted().find((j) => j.id === requestId)?.cancelled).toBe(true);
    expect(
      fal.requests.some((r) => r.method === 'PUT' && r.url === `/fal-ai/flux/requests/${requestId}/cancel`),
    ).toBe(true);
    await adapter.cancel(jobId); // now ALREADY_COMPLETED
    await adapter.cancel('fal-ai/flux/dev::no-such-request'); // NOT_FOUND
    expect(await adapter.status('fal-ai/flux/dev::no-such-request')).toMatchObject({ state: 'failed' });
  });

  it('cannot look a request up by our token', async () => {
    expect(await adapter.lookup('tok_anything')).toEqual({ found: 'unknown' });
  });

  it('keeps the key out of what it says when fal refuses it', async () => {
    const wrong = new FalQueueProvider({
      key: 'wrong-key-77aa',
      queueUrl: fal.origin,
      storage,
      download,
    });
    const error = await wrong.submit(job({ prompt: 'x' })).catch((e: Error) => e);
    expect(error).toBeInstanceOf(ProviderTransientError);
    expect((error as Error).message).not.toContain('wrong-key-77aa');
    expect(JSON.stringify(fal.requests)).not.toContain(key);
  });
});
