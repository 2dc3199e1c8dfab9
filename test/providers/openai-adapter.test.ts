import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { imageSize } from 'image-size';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { z } from 'zod';
import { freePort } from '../../src/dev/free-port.js';
import {
  OpenAiImagesProvider,
  type OpenAiImagesOptions,
} from '../../src/providers/openai/openai-images-provider.js';
import {
  ProviderRejection,
  ProviderResultGone,
  ProviderTransientError,
  ProviderUncertainError,
  type ProviderJob,
} from '../../src/providers/provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { drawImage } from '../support/providers/fake-files.js';
import { promptContains, startFakeHttp, type FakeHttpServer } from '../support/providers/fake-http.js';
import { OpenAiImagesServer, openAiError } from '../support/providers/openai-images-server.js';

/** The OpenAI Images adapter against the local OpenAI server and a real database. */
describe('OpenAI Images adapter', () => {
  let db: TestDatabase;
  let openai: OpenAiImagesServer;
  let storageDir: string;
  let storage: LocalStorage;
  /** Serves reference images from loopback, as a client's own host would. */
  let pictures: FakeHttpServer;
  let adapter: OpenAiImagesProvider;
  const key = `sk-proj-${randomBase62(40)}`;
  const make = (options: Partial<OpenAiImagesOptions> = {}) =>
    new OpenAiImagesProvider(db.pool, {
      apiKey: key,
      baseUrl: openai.env().OPENAI_BASE_URL!,
      storage,
      download: { allowCidrs: ['127.0.0.1/32'], allowHttp: true },
      callTimeoutMs: 5_000,
      ...options,
    });

  /** A job as the submit activity builds it from a catalog entry with an OpenAI provider block. */
  const job = (prompt: string, input: Record<string, unknown> = {}, images: string[] = []): ProviderJob => ({
    token: `tok_gen_${randomBase62(12)}`,
    model: 'openai-gpt-image-1',
    mediaType: 'image',
    prompt,
    options: {},
    images,
    longEdgePx: 1024,
    target: {
      model: 'gpt-image-1',
      input: { prompt, n: 1, ...input, ...(images.length ? { image: images } : {}) },
    },
  });
  const submitted = async (j: ProviderJob) => (await adapter.submit(j)).jobId;
  const row = (jobId: string) =>
    db.pool.one(
      sql.type(
        z.object({
          state: z.string(),
          sends: z.number(),
          error: z.string().nullable(),
          has_request: z.boolean(),
        }),
      )`SELECT state, sends, error, request IS NOT NULL AS has_request FROM openai_image_calls WHERE job_id = ${jobId}`,
    );
  const calls = () => openai.creates;

  beforeAll(async () => {
    db = await createTestDatabase();
    openai = await OpenAiImagesServer.start({ key });
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'openai-adapter-'));
    storage = new LocalStorage(storageDir, 'http://127.0.0.1:9/results');
    const png = await drawImage(40, 30, 'png');
    pictures = await startFakeHttp((request, _body, response) => {
      // A customer's host misbehaving: gone, not an image, failing for now.
      if (request.url === '/missing.png') return void response.writeHead(404).end();
      if (request.url === '/page.png')
        return void response.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
      if (request.url === '/flaky.png') return void response.writeHead(503).end();
      const gif = request.url === '/pic.gif';
      response.writeHead(200, { 'content-type': gif ? 'image/gif' : 'image/png' });
      response.end(gif ? Buffer.from('GIF89a\u0001\u0000\u0001\u0000') : png);
    });
    adapter = make();
  });
  afterAll(async () => {
    await pictures?.close();
    await openai?.close();
    await db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  it('submit records the call without a byte on the network, once per token; lookup finds it by token', async () => {
    const before = openai.requests.length;
    const first = job('a lighthouse');
    const jobId = await submitted(first);
    expect(jobId).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(await submitted(first)).toBe(jobId);
    expect(openai.requests.length).toBe(before);
    expect(await row(jobId)).toMatchObject({ state: 'pending', sends: 0, has_request: true });
    expect(await adapter.lookup(first.token)).toEqual({ found: true, jobId });
    expect(await adapter.lookup('tok_gen_never')).toEqual({ found: false });
  });

  it('generates: status makes the one call with the catalog input, stages the images, then answers from its row', async () => {
    const jobId = await submitted(
      job('a red kite', { size: '1536x1024', quality: 'low', output_format: 'jpeg' }),
    );
    const before = calls();
    const status = await adapter.status(jobId);
    expect(status).toEqual({
      state: 'succeeded',
      results: [{ width: 1536, height: 1024, contentType: 'image/jpeg' }],
    });
    expect(calls() - before).toBe(1);
    const sent = openai.requests.at(-1)!;
    expect(sent).toMatchObject({ method: 'POST', url: '/v1/images/generations' });
    expect(sent.headers.authorization).toBe('Bearer [redacted]');
    expect(JSON.parse(sent.body)).toEqual({
      model: 'gpt-image-1',
      prompt: 'a red kite',
      n: 1,
      size: '1536x1024',
      quality: 'low',
      output_format: 'jpeg',
    });
    const { bytes, contentType } = await adapter.fetchResult(jobId, 0);
    expect(contentType).toBe('image/jpeg');
    expect(imageSize(bytes)).toMatchObject({ width: 1536, height: 1024, type: 'jpg' });

    // Asked again (a retried wait, persisting later): the row answers, OpenAI is not called.
    expect(await adapter.status(jobId)).toEqual(status);
    expect(calls() - before).toBe(1);
    expect(await row(jobId)).toMatchObject({ state: 'succeeded', sends: 1, has_request: false });
  });

  it('edits: each reference image (ours from storage, others fetched) is uploaded as an image[] file', async () => {
    const ours = await drawImage(64, 48, 'webp');
    const stored = await storage.put(`in${randomBase62(10)}`, 'input-0.webp', ours);
    const jobId = await submitted(
      job('make it night', { size: '1024x1536' }, [stored, `${pictures.origin}/pic.png`]),
    );
    expect(await adapter.status(jobId)).toEqual({
      state: 'succeeded',
      results: [{ width: 1024, height: 1536, contentType: 'image/png' }],
    });
    const call = openai.accepted().at(-1)!;
    expect(call.endpoint).toBe('edits');
    expect(call.input).toMatchObject({
      model: 'gpt-image-1',
      prompt: 'make it night',
      size: '1024x1536',
      n: 1,
    });
    expect(call.input).not.toHaveProperty('image');
    expect(call.images).toEqual([
      { name: 'image-1.webp', type: 'image/webp', size: ours.length },
      { name: 'image-2.png', type: 'image/png', size: (await drawImage(40, 30, 'png')).length },
    ]);
    expect(openai.requests.at(-1)!.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
  });

  it('a reference image OpenAI does not take (gif) is refused before any call: failed, rejected', async () => {
    const jobId = await submitted(job('animate', {}, [`${pictures.origin}/pic.gif`]));
    const before = calls();
    expect(await adapter.status(jobId)).toMatchObject({ state: 'failed', rejected: true });
    expect(calls()).toBe(before);
    expect(await row(jobId)).toMatchObject({ state: 'failed', sends: 0 });
  });

  it('a customer’s image URL that fails is the request’s fault: rejected, OpenAI never called', async () => {
    // No such host, a 404, a page that is no image: refused at once.
    for (const url of [
      'https://nowhere.invalid/a.png',
      `${pictures.origin}/missing.png`,
      `${pictures.origin}/page.png`,
    ]) {
      const jobId = await submitted(job('edit', {}, [url]));
      const before = calls();
      const started = Date.now();
      const status = await adapter.status(jobId);
      expect(status).toMatchObject({ state: 'failed', rejected: true });
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(calls()).toBe(before);
    }
    // A host failing for now (5xx): three tries, a second, then two apart, then refused.
    const flaky = () => pictures.requests.filter((r) => r.url === '/flaky.png').length;
    const jobId = await submitted(job('edit', {}, [`${pictures.origin}/flaky.png`]));
    expect(await adapter.status(jobId)).toMatchObject({
      state: 'failed',
      rejected: true,
      message: expect.stringContaining('3 tries') as unknown,
    });
    expect(flaky()).toBe(3);
    expect(await row(jobId)).toMatchObject({ state: 'failed', sends: 0 });
  });

  it('a call slower than undici’s own header timeout still gets its answer: the call’s deadline governs', async () => {
    // Node's fetch gives up on headers after 300 s by default, under OpenAI's 10 minutes. Played
    // short: a process-wide dispatcher that would give up after 300 ms, and a 1 s answer.
    const before = getGlobalDispatcher();
    setGlobalDispatcher(new Agent({ headersTimeout: 300, bodyTimeout: 300 }));
    try {
      openai.script({ delayMs: 1_000 }, promptContains('slow'));
      const jobId = await submitted(job('a slow sunrise'));
      expect(await make({ callTimeoutMs: 5_000 }).status(jobId)).toMatchObject({ state: 'succeeded' });
    } finally {
      setGlobalDispatcher(before);
    }
  });

  it('more reference images than OpenAI takes are refused at submit', async () => {
    const urls = Array.from({ length: 17 }, (_, i) => `${pictures.origin}/pic-${i}.png`);
    await expect(adapter.submit(job('collage', {}, urls))).rejects.toBeInstanceOf(ProviderRejection);
  });

  it('400 invalid_request_error (bad input, a moderation refusal): failed, rejected, with OpenAI’s message; never sent again', async () => {
    const invalid = await submitted(job('a square', { size: '999x999' }));
    const refused = await adapter.status(invalid);
    expect(refused).toMatchObject({ state: 'failed', rejected: true });
    expect((refused as { message: string }).message).toMatch(/HTTP 400.*Invalid value: '999x999'/);

    openai.script(
      {
        fault: {
          kind: 'status',
          status: 400,
          body: openAiError(
            'Your request was rejected by the safety system.',
            'image_generation_user_error',
            'moderation_blocked',
          ),
        },
      },
      promptContains('forbidden'),
    );
    const blocked = await submitted(job('something forbidden'));
    const before = calls();
    expect(await adapter.status(blocked)).toMatchObject({ state: 'failed', rejected: true });
    expect(await adapter.status(blocked)).toMatchObject({ state: 'failed', rejected: true });
    expect(calls() - before).toBe(1);
    expect(await row(blocked)).toMatchObject({ state: 'failed', sends: 1 });
  });

  it('429 with Retry-After: transient after that long, back to pending; the next status call succeeds', async () => {
    openai.script({ fault: { kind: 'status', status: 429, retryAfter: 2 } }, promptContains('busy'));
    const jobId = await submitted(job('busy hour'));
    const before = { calls: calls(), billed: openai.accepted().length };
    const throttled = await adapter.status(jobId).catch((error: unknown) => error);
    expect(throttled).toBeInstanceOf(ProviderTransientError);
    expect((throttled as ProviderTransientError).retryAfterMs).toBe(2000);
    expect(await row(jobId)).toMatchObject({ state: 'pending', sends: 1 });
    expect(await adapter.status(jobId)).toMatchObject({ state: 'succeeded' });
    expect(calls() - before.calls).toBe(2);
    expect(openai.accepted().length - before.billed).toBe(1);
    expect(await row(jobId)).toMatchObject({ state: 'succeeded', sends: 2 });
  });

  it('a refused connection (nothing sent) and a refused key are transient: the call stays pending', async () => {
    const closed = make({ baseUrl: `http://127.0.0.1:${await freePort()}/v1` });
    const jobId = await submitted(job('nobody home'));
    await expect(closed.status(jobId)).rejects.toBeInstanceOf(ProviderTransientError);
    expect(await row(jobId)).toMatchObject({ state: 'pending' });

    const wrongKey = make({ apiKey: 'sk-not-ours' });
    const refused = await wrongKey.status(jobId).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ProviderTransientError);
    expect(String(refused)).not.toContain('sk-not-ours');
    expect(await row(jobId)).toMatchObject({ state: 'pending' });
    expect(await adapter.status(jobId)).toMatchObject({ state: 'succeeded' });
  });

  it.each([
    ['a dropped connection', 'dropped', { fault: { kind: 'drop' as const } }],
    ['a body cut short', 'cut short', { truncate: true }],
    ['a 500', 'server error', { fault: { kind: 'status' as const, status: 500 } }],
    ['no answer in time', 'hung', { fault: { kind: 'hang' as const } }],
  ])('%s after the call left us: uncertain, the call lost, never sent again', async (_, prompt, outcome) => {
    openai.script(outcome, promptContains(prompt));
    const impatient = make({ callTimeoutMs: 500 });
    const jobId = await submitted(job(prompt));
    const before = calls();
    await expect(impatient.status(jobId)).rejects.toBeInstanceOf(ProviderUncertainError);
    expect(await row(jobId)).toMatchObject({ state: 'lost', sends: 1, has_request: false });
    await expect(adapter.status(jobId)).rejects.toBeInstanceOf(ProviderUncertainError);
    expect(calls() - before).toBe(1);
  });

  it('a call claimed by a worker that died mid-call is uncertain, never sent a second time', async () => {
    const jobId = await submitted(job('orphan'));
    await db.pool.query(sql.unsafe`
      UPDATE openai_image_calls SET state = 'sent', sent_at = now(), sends = 1 WHERE job_id = ${jobId}`);
    const before = calls();
    await expect(adapter.status(jobId)).rejects.toThrow(/not sent again/);
    expect(calls()).toBe(before);
  });

  it('two waits on one pending call at once: exactly one call; the other is uncertain', async () => {
    openai.script({ delayMs: 300 }, promptContains('twice'));
    const jobId = await submitted(job('asked twice'));
    const before = calls();
    const outcomes = await Promise.allSettled([adapter.status(jobId), make().status(jobId)]);
    expect(calls() - before).toBe(1);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    const rejected = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect(rejected.reason).toBeInstanceOf(ProviderUncertainError);
  });

  it('cancel: a pending call is never sent; a call already answered is left as it is', async () => {
    const pending = await submitted(job('never mind'));
    await adapter.cancel(pending);
    const before = calls();
    expect(await adapter.status(pending)).toMatchObject({ state: 'failed' });
    expect(await adapter.status(pending)).not.toHaveProperty('rejected');
    expect(calls()).toBe(before);

    const done = await submitted(job('finished'));
    await adapter.status(done);
    await adapter.cancel(done);
    expect(await row(done)).toMatchObject({ state: 'succeeded' });
  });

  it('staged images go after their retention (the result is then gone), call records after theirs', async () => {
    const jobId = await submitted(job('short-lived'));
    await adapter.status(jobId);
    expect((await adapter.fetchResult(jobId, 0)).bytes.length).toBeGreaterThan(0);
    await db.pool.query(sql.unsafe`
      UPDATE openai_image_results SET staged_at = now() - interval '2 hours' WHERE job_id = ${jobId}`);
    const purger = make({ stagedRetentionMs: 3_600_000, recordRetentionMs: 24 * 3_600_000 });
    expect((await purger.purgeExpired()).images).toBe(1);
    await expect(adapter.fetchResult(jobId, 0)).rejects.toBeInstanceOf(ProviderResultGone);
    expect(await row(jobId)).toMatchObject({ state: 'succeeded' });

    await db.pool.query(sql.unsafe`
      UPDATE openai_image_calls SET created_at = now() - interval '2 days' WHERE job_id = ${jobId}`);
    expect(await purger.purgeExpired()).toEqual({ images: 0, calls: 1 });
    expect(await adapter.lookup('tok_gen_none')).toEqual({ found: false });
  });

  it('never keeps the API key: not in any row of its tables', async () => {
    const text = await db.pool.oneFirst(sql.type(z.object({ t: z.string() }))`
      SELECT coalesce(string_agg(c::text, ''), '') AS t FROM openai_image_calls c`);
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(key);
    expect(JSON.stringify(openai.requests)).not.toContain(key);
  });
});
