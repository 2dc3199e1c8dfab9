import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promptContains, startFakeHttp, type FakeHttpServer } from '../support/providers/fake-http.js';
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

  describe('webhooks', () => {
    let receiver: FakeHttpServer;
    /** The receiver's next answers (then 200). */
    const answers: number[] = [];
    const hook = () => `${receiver.origin}/hook`;
    const secretOf = async () => (await call(`${api}/webhooks/default/secret`, { headers: auth })).body.key;
    /** Whether a delivery's signature is the secret's, Standard Webhooks style. */
    const signedBy = (secret: string, delivery: { headers: Record<string, string>; body: string }) => {
      const { 'webhook-id': id, 'webhook-timestamp': timestamp } = delivery.headers;
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      const expected = createHmac('sha256', key)
        .update(`${id}.${timestamp}.${delivery.body}`)
        .digest('base64');
      return delivery.headers['webhook-signature']!.split(' ').includes(`v1,${expected}`);
    };
    beforeAll(async () => {
      receiver = await startFakeHttp((_request, _body, response) => {
        response.writeHead(answers.shift() ?? 200).end();
      });
    });
    afterAll(() => receiver.close());

    it('serves the account secret to the token only, and signs with it; rotate makes a new one', async () => {
      const secret = await secretOf();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
      expect((await call(`${api}/webhooks/default/secret`)).status).toBe(401);
      replicate.signing.rotate();
      expect(await secretOf()).not.toBe(secret);
    });

    it('a timed run (runMs) pushes the finished prediction once to the webhook, signed; "completed" only', async () => {
      // A create without a webhook records none, and nothing is ever pushed for it.
      const quiet = (await create({ prompt: 'quiet fox' })).body.id as string;
      expect(replicate.accepted().find((p) => p.id === quiet)?.webhook).toBeUndefined();
      replicate.script({ runMs: 100 }, promptContains('timed'));
      const timed = await call(`${api}/models/owner/timed/predictions`, {
        method: 'POST',
        headers: auth,
        json: { input: { prompt: 'timed' }, webhook: hook(), webhook_events_filter: ['completed'] },
      });
      const { id } = timed.body;
      expect(replicate.accepted().find((p) => p.id === id)).toMatchObject({
        webhook: hook(),
        webhookEvents: ['completed'],
      });
      // No poll: the prediction ends on its clock (unscripted ones end by polls, or after defaultRunMs).
      expect(replicate.statusOf(id)).toBe('starting');
      await replicate.webhooks.settledAfter(id);
      const [attempt, ...more] = replicate.webhooks.attemptsFor(id);
      expect(more).toEqual([]);
      expect(attempt).toMatchObject({ url: hook(), status: 200, kind: 'genuine' });
      const delivered = receiver.requests.find((r) => r.body.includes(id))!;
      expect(delivered.headers['content-type']).toBe('application/json');
      expect(JSON.parse(delivered.body)).toMatchObject({
        id,
        status: 'succeeded',
        output: [expect.stringMatching(/^http/)],
      });
      expect(delivered.headers['webhook-id']).toMatch(/^msg_/);
      expect(Math.abs(Number(delivered.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
      expect(signedBy(await secretOf(), delivered)).toBe(true);
      // Polled now, it is what was pushed; polling never pushes it again.
      expect((await call(`${api}/predictions/${id}`, { headers: auth })).body.status).toBe('succeeded');
      await replicate.webhooks.settled();
      expect(replicate.webhooks.attemptsFor(id)).toHaveLength(1);
      expect(replicate.webhooks.attemptsFor(quiet)).toEqual([]);
    });

    it('without a filter pushes start and completed; a prediction ended by polls, release or cancel pushes then', async () => {
      const make = async (prompt: string, filter?: string[]) =>
        (
          await call(`${api}/models/owner/m/predictions`, {
            method: 'POST',
            headers: auth,
            json: {
              input: { prompt },
              webhook: hook(),
              ...(filter ? { webhook_events_filter: filter } : {}),
            },
          })
        ).body.id as string;
      const polled = await make('by polls');
      for (let i = 0; i < 3; i++) await call(`${api}/predictions/${polled}`, { headers: auth });
      replicate.script({ hold: true }, promptContains('held'));
      const held = await make('held', ['completed']);
      replicate.release(held);
      const canceled = await make('to cancel', ['completed']);
      await call(`${api}/predictions/${canceled}/cancel`, { method: 'POST', headers: auth });
      await replicate.webhooks.settled();
      const statuses = (id: string) =>
        replicate.webhooks.attemptsFor(id).map((a) => (JSON.parse(a.body) as { status: string }).status);
      expect(statuses(polled)).toEqual(['starting', 'succeeded']);
      expect(statuses(held)).toEqual(['succeeded']);
      expect(statuses(canceled)).toEqual(['canceled']);
    });

    it('retries a refused delivery (same webhook-id, fresh timestamp), and plays lose, duplicate, late, forge, replay', async () => {
      replicate.defaultRunMs = 20;
      const ended = async (prompt: string) => {
        const { id } = (
          await call(`${api}/models/owner/m/predictions`, {
            method: 'POST',
            headers: auth,
            json: { input: { prompt }, webhook: hook(), webhook_events_filter: ['completed'] },
          })
        ).body;
        // Its end comes 20 ms after the create (later on a loaded machine).
        await replicate.webhooks.settledAfter(id as string);
        return { id: id as string, attempts: replicate.webhooks.attemptsFor(id) };
      };
      try {
        answers.push(500, 503);
        const retried = await ended('retried');
        expect(retried.attempts.map((a) => a.status)).toEqual([500, 503, 200]);
        expect(new Set(retried.attempts.map((a) => a.headers['webhook-id'])).size).toBe(1);

        replicate.webhooks.lose();
        const lost = await ended('lost');
        expect([lost.attempts, replicate.webhooks.lost.at(-1)?.jobId]).toEqual([[], lost.id]);
        // The provider's own redelivery, freshly signed.
        expect(replicate.webhooks.redeliver(lost.id)).toBe(true);
        await replicate.webhooks.settled();
        expect(replicate.webhooks.attemptsFor(lost.id).map((a) => [a.kind, a.status])).toEqual([
          ['redelivered', 200],
        ]);

        replicate.webhooks.duplicate();
        const twice = await ended('twice');
        expect(twice.attempts.map((a) => a.kind)).toEqual(['genuine', 'duplicate']);
        expect(twice.attempts[1]!.headers).toEqual(twice.attempts[0]!.headers);

        replicate.webhooks.late();
        const late = await ended('late');
        expect(late.attempts).toEqual([]);
        replicate.webhooks.sendLate();
        await replicate.webhooks.settled();
        expect(replicate.webhooks.attemptsFor(late.id)).toHaveLength(1);

        const secret = await secretOf();
        answers.push(401);
        replicate.webhooks.forge();
        const forged = await ended('forged');
        expect(forged.attempts.map((a) => [a.kind, a.status])).toEqual([['forged', 401]]); // never retried
        expect(signedBy(secret, forged.attempts[0]!)).toBe(false);

        replicate.webhooks.replay(1, 600);
        const replayed = await ended('replayed');
        const [old] = replayed.attempts;
        expect(old!.kind).toBe('replayed');
        expect(Date.now() / 1000 - Number(old!.headers['webhook-timestamp'])).toBeGreaterThan(590);
        expect(signedBy(secret, old!)).toBe(true);
      } finally {
        replicate.defaultRunMs = undefined;
      }
    });
  });
});
