import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promptContains } from '../support/providers/fake-http.js';
import { call, download, outcomeWithin } from '../support/providers/plain-fetch.js';
import { probeVideo } from '../support/providers/probe-video.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';

// The Replicate fake, exercised with plain fetch, so that an adapter test failing later points at
// the adapter and not at the fake.

describe('Replicate fake', () => {
  let replicate: ReplicateServer;
  let api: string;
  const auth = { authorization: 'Bearer r8_test_token' };
  const create = (input: unknown, headers: Record<string, string> = {}) =>
    call(`${api}/models/black-forest-labs/flux-schnell/predictions`, {
      method: 'POST',
      headers: { ...auth, ...headers },
      json: { input },
    });
  beforeAll(async () => {
    replicate = await ReplicateServer.start();
    api = replicate.env().REPLICATE_API_URL!;
  });
  afterAll(() => replicate.close());

  it('refuses a request without the token or with another one, and never logs the token', async () => {
    const none = await call(`${api}/predictions`);
    expect([none.status, none.body.title]).toEqual([401, 'Unauthenticated']);
    expect((await create({ prompt: 'x' }, { authorization: 'Bearer r8_wrong' })).status).toBe(401);
    expect(replicate.creates).toBe(0);
    expect(JSON.stringify(replicate.requests)).not.toContain('r8_wrong');
  });

  it('runs create → starting → processing → succeeded → output files of the requested size', async () => {
    const created = await create(
      { prompt: 'a fox', aspect_ratio: '16:9', num_outputs: 2 },
      { 'cancel-after': '5m' },
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      status: 'starting',
      model: 'black-forest-labs/flux-schnell',
      output: null,
    });
    const { get, cancel } = created.body.urls;
    expect(get).toBe(`${api}/predictions/${created.body.id}`);
    expect(replicate.requests.at(-1)!.headers['cancel-after']).toBe('5m');

    expect((await call(get, { headers: auth })).body.status).toBe('starting');
    expect((await call(get, { headers: auth })).body.status).toBe('processing');
    const done = await call(get, { headers: auth });
    expect(done.body).toMatchObject({ status: 'succeeded', error: null, metrics: { predict_time: 1.5 } });
    expect(done.body.output).toHaveLength(2);
    const file = await download(done.body.output[0]);
    expect([file.status, file.type, file.size?.width, file.size?.height]).toEqual([
      200,
      'image/png',
      1024,
      576,
    ]);
    // Cancelling a finished prediction leaves it as it was.
    expect((await call(cancel, { method: 'POST', headers: auth })).body.status).toBe('succeeded');
  });

  it('creates by version, and Prefer: wait answers with the finished prediction', async () => {
    replicate.script({ outputAsString: true }, promptContains('versioned'));
    const created = await call(`${api}/predictions`, {
      method: 'POST',
      headers: { ...auth, prefer: 'wait=5' },
      json: { version: 'owner/model:abc123', input: { prompt: 'versioned', width: 300, height: 400 } },
    });
    expect(created.body).toMatchObject({ status: 'succeeded', model: 'owner/model', version: 'abc123' });
    const file = await download(created.body.output);
    expect([file.size?.width, file.size?.height]).toEqual([300, 400]);
    const noVersion = await call(`${api}/predictions`, {
      method: 'POST',
      headers: auth,
      json: { input: { prompt: 'x' } },
    });
    expect([noVersion.status, noVersion.body.invalid_fields[0].field]).toEqual([422, 'version']);
  });

  it('ends failed, canceled or aborted as scripted, and cancels a running prediction', async () => {
    for (const final of ['failed', 'canceled', 'aborted'] as const) {
      replicate.script({
        pollsStarting: 0,
        pollsProcessing: 0,
        final,
        error: final === 'failed' ? 'CUDA out of memory' : undefined,
      });
      const created = await create({ prompt: final });
      const seen = await call(created.body.urls.get, { headers: auth });
      expect([seen.body.status, seen.body.output, seen.body.error]).toEqual([
        final,
        null,
        final === 'failed' ? 'CUDA out of memory' : null,
      ]);
    }
    replicate.script({ hold: true });
    const held = await create({ prompt: 'long video' });
    for (let i = 0; i < 4; i++) await call(held.body.urls.get, { headers: auth });
    expect(replicate.statusOf(held.body.id)).toBe('processing');
    const canceled = await call(held.body.urls.cancel, { method: 'POST', headers: auth });
    expect([canceled.status, canceled.body.status]).toEqual([200, 'canceled']);
    expect(replicate.accepted().at(-1)).toMatchObject({ id: held.body.id, canceled: true });
  });

  it('lists recent predictions newest first, in cursor pages', async () => {
    replicate.pageSize = 2;
    const first = await call(`${api}/predictions`, { headers: auth });
    const all = replicate.accepted();
    expect(first.body.results.map((p: any) => p.id)).toEqual([all.at(-1)!.id, all.at(-2)!.id]);
    expect(first.body.previous).toBeNull();
    const second = await call(first.body.next, { headers: auth });
    expect(second.body.results[0].id).toBe(all.at(-3)!.id);
    replicate.pageSize = 100;
  });

  it('plays validation, throttling, server errors and a lost answer on create', async () => {
    const before = { creates: replicate.creates, accepted: replicate.accepted().length };
    const invalid = await create({ steps: 4 });
    expect([invalid.status, invalid.body.title, invalid.body.invalid_fields[0].field]).toEqual([
      422,
      'Input validation failed',
      'input.prompt',
    ]);
    replicate.failCreate({ kind: 'status', status: 429, retryAfter: 2 });
    const throttled = await create({ prompt: 'x' });
    expect([throttled.status, throttled.headers.get('retry-after'), throttled.body.status]).toEqual([
      429,
      '2',
      429,
    ]);
    replicate.failCreate({ kind: 'status', status: 500 });
    expect((await create({ prompt: 'x' })).status).toBe(500);
    replicate.failCreate({ kind: 'status', status: 503, accepted: true }, promptContains('half'));
    expect((await create({ prompt: 'half-accepted' })).status).toBe(503);

    replicate.failCreate({ kind: 'hang' });
    const controller = new AbortController();
    const hung = call(`${api}/models/a/b/predictions`, {
      method: 'POST',
      headers: auth,
      json: { input: { prompt: 'lost' } },
      signal: controller.signal,
    });
    expect(await outcomeWithin(hung, 300)).toBe('no answer');
    controller.abort();
    await hung.catch(() => undefined);
    replicate.failCreate({ kind: 'drop' });
    expect(await outcomeWithin(create({ prompt: 'dropped' }), 2000)).toMatch(/^failed/);

    expect(replicate.creates - before.creates).toBe(6);
    const accepted = replicate
      .accepted()
      .slice(before.accepted)
      .map((p) => p.input.prompt);
    expect(accepted).toEqual(['half-accepted', 'lost', 'dropped']);
    // What was accepted can be found in the list, as an adapter's lookup would.
    const listed = await call(`${api}/predictions`, { headers: auth });
    expect(listed.body.results.slice(0, 3).map((p: any) => p.input.prompt)).toEqual([
      'dropped',
      'lost',
      'half-accepted',
    ]);
  });

  it('fails polls as scripted, answers 404 for an unknown prediction, and expires output files', async () => {
    const created = await create({ prompt: 'x' }, { prefer: 'wait' });
    replicate.failPolls({ kind: 'status', status: 503 }, { kind: 'drop' });
    expect((await call(created.body.urls.get, { headers: auth })).status).toBe(503);
    expect(await outcomeWithin(call(created.body.urls.get, { headers: auth }), 2000)).toMatch(/^failed/);
    expect((await call(created.body.urls.get, { headers: auth })).body.status).toBe('succeeded');
    expect((await call(`${api}/predictions/nope`, { headers: auth })).status).toBe(404);
    const url = created.body.output[0];
    expect((await download(url)).status).toBe(200);
    replicate.files.expire();
    expect((await download(url)).status).toBe(404);
  });

  it('says whose account the token is (GET /v1/account), and only to the token', async () => {
    expect((await call(`${api}/account`, { headers: auth })).body).toMatchObject({ username: 'acme' });
    expect((await call(`${api}/account`)).status).toBe(401);
  });

  it('answers a video model with the URL of a real MP4 of the scripted size and duration', async () => {
    replicate.script({ video: { width: 256, height: 144, durationSeconds: 2 } }, promptContains('clip'));
    const created = await create(
      { prompt: 'clip', start_image: 'data:image/png;base64,AAAA' },
      { prefer: 'wait' },
    );
    expect(created.body.status).toBe('succeeded');
    expect(typeof created.body.output).toBe('string');
    const bytes = Buffer.from(await (await fetch(created.body.output)).arrayBuffer());
    expect(await probeVideo(bytes)).toEqual({ width: 256, height: 144, seconds: 2 });
  });
});
