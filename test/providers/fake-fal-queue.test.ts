import { createHash, createPublicKey, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FalQueueServer, falRequestError } from '../support/providers/fal-queue-server.js';
import { promptContains, startFakeHttp, type FakeHttpServer } from '../support/providers/fake-http.js';
import { call, download, outcomeWithin } from '../support/providers/plain-fetch.js';
import { probeVideo } from '../support/providers/probe-video.js';

// The fal fake, exercised with plain fetch, so that an adapter test failing later points at the
// adapter and not at the fake.

describe('fal queue fake', () => {
  let fal: FalQueueServer;
  const key = { authorization: 'Key fal-test-key' };
  beforeAll(async () => {
    fal = await FalQueueServer.start();
  });
  afterAll(() => fal.close());

  it('refuses a request without the key or with another one, and never logs the key', async () => {
    const input = { prompt: 'a cat' };
    expect((await call(`${fal.origin}/fal-ai/flux/dev`, { method: 'POST', json: input })).status).toBe(401);
    const wrong = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      json: input,
      headers: { authorization: 'Key nope' },
    });
    expect(wrong.status).toBe(401);
    const bearer = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      json: input,
      headers: { authorization: 'Bearer fal-test-key' },
    });
    expect(bearer.status).toBe(401);
    expect(fal.creates).toBe(0);
    expect(JSON.stringify(fal.requests)).not.toContain('fal-test-key');
    expect(fal.requests.at(-1)!.headers.authorization).toBe('Bearer [redacted]');
  });

  it('runs submit → IN_QUEUE → IN_PROGRESS → COMPLETED → result → file of the requested size', async () => {
    const submit = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'a lighthouse', image_size: { width: 320, height: 200 }, num_images: 2 },
    });
    expect(submit.status).toBe(200);
    const { request_id: id, status_url, response_url, cancel_url } = submit.body;
    // Status, result and cancel live under owner/app, without the /dev subpath.
    expect(status_url).toBe(`${fal.origin}/fal-ai/flux/requests/${id}/status`);
    expect(cancel_url).toBe(`${fal.origin}/fal-ai/flux/requests/${id}/cancel`);
    expect((await call(`${fal.origin}/fal-ai/flux/dev/requests/${id}/status`, { headers: key })).status).toBe(
      404,
    );
    expect((await call(response_url, { headers: key })).status).toBe(400); // not done yet, and no poll counted

    const first = await call(`${status_url}?logs=1`, { headers: key });
    expect([first.status, first.body.status, first.body.queue_position, first.body.logs]).toEqual([
      202,
      'IN_QUEUE',
      0,
      [],
    ]);
    const second = await call(status_url, { headers: key });
    expect([second.status, second.body.status]).toEqual([202, 'IN_PROGRESS']);
    const third = await call(status_url, { headers: key });
    expect([third.status, third.body.status, third.body.response_url]).toEqual([
      200,
      'COMPLETED',
      response_url,
    ]);

    const result = await call(response_url, { headers: key });
    expect(result.status).toBe(200);
    expect(result.body.images).toHaveLength(2);
    expect(result.body.images[0]).toMatchObject({ width: 320, height: 200, content_type: 'image/png' });
    const file = await download(result.body.images[0].url);
    expect([file.status, file.type, file.size?.width, file.size?.height]).toEqual([
      200,
      'image/png',
      320,
      200,
    ]);
    // Asked again, the result is the same.
    expect((await call(response_url, { headers: key })).body).toEqual(result.body);
    expect((await call(cancel_url, { method: 'PUT', headers: key })).body).toEqual({
      status: 'ALREADY_COMPLETED',
    });
  });

  it('maps image_size presets, and holds a request until released', async () => {
    fal.script({ hold: true, pollsInQueue: 0 }, promptContains('held'));
    const submit = await call(`${fal.origin}/fal-ai/flux/schnell`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'held', image_size: 'portrait_16_9' },
    });
    const id = submit.body.request_id;
    for (let i = 0; i < 5; i++)
      expect((await call(submit.body.status_url, { headers: key })).body.status).toBe('IN_PROGRESS');
    fal.release(id);
    expect((await call(submit.body.status_url, { headers: key })).body.status).toBe('COMPLETED');
    const image = (await call(submit.body.response_url, { headers: key })).body.images[0];
    expect([image.width, image.height]).toEqual([576, 1024]);
  });

  it('cancels a queued request: CANCELLATION_REQUESTED, then COMPLETED with a client_cancelled error', async () => {
    fal.script({ pollsInQueue: 10 });
    const submit = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'cancel me' },
    });
    const cancel = await call(submit.body.cancel_url, { method: 'PUT', headers: key });
    expect([cancel.status, cancel.body]).toEqual([202, { status: 'CANCELLATION_REQUESTED' }]);
    expect((await call(submit.body.status_url, { headers: key })).body.status).toBe('COMPLETED');
    const result = await call(submit.body.response_url, { headers: key });
    expect([result.status, result.body.error_type]).toEqual([499, 'client_cancelled']);
    const unknown = await call(`${fal.origin}/fal-ai/flux/requests/nope/cancel`, {
      method: 'PUT',
      headers: key,
    });
    expect([unknown.status, unknown.body]).toEqual([404, { status: 'NOT_FOUND' }]);
  });

  it('answers a COMPLETED request whose result is an error with that error', async () => {
    fal.script({
      pollsInQueue: 0,
      pollsInProgress: 0,
      error: falRequestError('runner_disconnected', 503, 'Runner disconnected'),
    });
    const submit = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'x' },
    });
    expect((await call(submit.body.status_url, { headers: key })).body.status).toBe('COMPLETED');
    const result = await call(submit.body.response_url, { headers: key });
    expect([result.status, result.body, result.headers.get('x-fal-error-type')]).toEqual([
      503,
      { detail: 'Runner disconnected', error_type: 'runner_disconnected' },
      'runner_disconnected',
    ]);
  });

  it('plays validation, throttling, server errors and a lost answer on create', async () => {
    const before = { creates: fal.creates, accepted: fal.accepted().length };
    const invalid = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { steps: 3 },
    });
    expect([invalid.status, invalid.body.detail[0].loc]).toEqual([422, ['body', 'prompt']]);
    fal.failCreate({ kind: 'status', status: 429, retryAfter: 3 });
    const throttled = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'x' },
    });
    expect([throttled.status, throttled.headers.get('retry-after')]).toEqual([429, '3']);
    fal.failCreate({ kind: 'status', status: 503 });
    expect(
      (await call(`${fal.origin}/fal-ai/flux/dev`, { method: 'POST', headers: key, json: { prompt: 'x' } }))
        .status,
    ).toBe(503);
    expect(fal.accepted().length).toBe(before.accepted); // none of those created a request

    fal.failCreate({ kind: 'hang' });
    const controller = new AbortController();
    const hung = call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'lost' },
      signal: controller.signal,
    });
    expect(await outcomeWithin(hung, 300)).toBe('no answer');
    controller.abort();
    await hung.catch(() => undefined);
    fal.failCreate({ kind: 'drop', accepted: false });
    expect(
      await outcomeWithin(
        call(`${fal.origin}/fal-ai/flux/dev`, { method: 'POST', headers: key, json: { prompt: 'x' } }),
        2000,
      ),
    ).toMatch(/^failed/);
    expect(fal.creates - before.creates).toBe(5);
    // The hung create was accepted (fal got the whole request); the dropped one was told not to be.
    expect(
      fal
        .accepted()
        .slice(before.accepted)
        .map((job) => job.input.prompt),
    ).toEqual(['lost']);
  });

  it('fails polls as scripted, and serves a result file that has expired as 403', async () => {
    fal.script({ pollsInQueue: 0, pollsInProgress: 0 });
    const submit = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'x' },
    });
    fal.failPolls({ kind: 'status', status: 500 }, { kind: 'status', status: 429, retryAfter: 1 });
    expect((await call(submit.body.status_url, { headers: key })).status).toBe(500);
    expect((await call(submit.body.status_url, { headers: key })).status).toBe(429);
    expect((await call(submit.body.status_url, { headers: key })).body.status).toBe('COMPLETED');
    const url = (await call(submit.body.response_url, { headers: key })).body.images[0].url;
    expect((await download(url)).status).toBe(200);
    fal.files.expire(url);
    expect((await download(url)).status).toBe(403);
  });

  it('answers a video model with a real MP4 of the scripted size and duration', async () => {
    fal.script({
      pollsInQueue: 0,
      pollsInProgress: 0,
      video: { width: 320, height: 240, durationSeconds: 1 },
    });
    const submit = await call(`${fal.origin}/fal-ai/kling-video/v2/text-to-video`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'waves' },
    });
    expect(submit.body.status_url).toBe(
      `${fal.origin}/fal-ai/kling-video/requests/${submit.body.request_id}/status`,
    );
    expect((await call(submit.body.status_url, { headers: key })).body.status).toBe('COMPLETED');
    const { video } = (await call(submit.body.response_url, { headers: key })).body;
    expect(video.content_type).toBe('video/mp4');
    const bytes = Buffer.from(await (await fetch(video.url)).arrayBuffer());
    expect(bytes.length).toBe(video.file_size);
    expect(await probeVideo(bytes)).toEqual({ width: 320, height: 240, seconds: 1 });
  });

  describe('webhooks', () => {
    let receiver: FakeHttpServer;
    const hook = () => `${receiver.origin}/hook?g=1`;
    const submit = async (input: Record<string, unknown>, webhook = hook()) =>
      (
        await call(`${fal.origin}/fal-ai/flux/dev?fal_webhook=${encodeURIComponent(webhook)}`, {
          method: 'POST',
          headers: key,
          json: input,
        })
      ).body as { request_id: string; gateway_request_id: string };
    /** Whether a delivery verifies against a key of the JWKS the fake serves, as fal's docs say. */
    const verifies = async (delivery: { headers: Record<string, string>; body: string }) => {
      const jwks = (await call(fal.env().FAL_JWKS_URL!)).body as { keys: Array<Record<string, string>> };
      const h = delivery.headers;
      const message = [
        h['x-fal-webhook-request-id'],
        h['x-fal-webhook-user-id'],
        h['x-fal-webhook-timestamp'],
        createHash('sha256').update(delivery.body).digest('hex'),
      ].join('\n');
      const signature = Buffer.from(h['x-fal-webhook-signature']!, 'hex');
      return jwks.keys.some((jwk) =>
        verify(null, Buffer.from(message), createPublicKey({ key: jwk, format: 'jwk' }), signature),
      );
    };
    beforeAll(async () => {
      receiver = await startFakeHttp((_request, _body, response) => {
        response.writeHead(200).end();
      });
    });
    afterAll(() => receiver.close());

    it('serves its public keys as a JWKS, without the key; env() names it as FAL_JWKS_URL', async () => {
      const jwks = await call(fal.env().FAL_JWKS_URL!);
      expect(jwks.status).toBe(200);
      expect(jwks.body.keys).toEqual([
        expect.objectContaining({
          kty: 'OKP',
          crv: 'Ed25519',
          x: expect.any(String),
          kid: expect.any(String),
        }),
      ]);
    });

    it('a timed run (runMs) pushes its end once: OK with the output as payload, signed with ED25519', async () => {
      fal.script({ runMs: 100 }, promptContains('pushed'));
      const created = await submit({ prompt: 'pushed', image_size: 'square' });
      expect(created.gateway_request_id).toBe(created.request_id);
      const { request_id: id } = created;
      expect(fal.accepted().find((j) => j.id === id)?.webhook).toBe(hook());
      expect(fal.statusOf(id)).toBe('IN_QUEUE'); // no poll: its clock ends it
      await fal.webhooks.settledAfter(id);
      const [attempt, ...more] = fal.webhooks.attemptsFor(id);
      expect([attempt?.url, attempt?.status, more]).toEqual([hook(), 200, []]);
      const delivered = receiver.requests.find((r) => r.body.includes(id))!;
      expect(JSON.parse(delivered.body)).toEqual({
        request_id: id,
        gateway_request_id: id,
        status: 'OK',
        payload: expect.objectContaining({
          images: [expect.objectContaining({ width: 512, height: 512, url: expect.any(String) })],
        }),
      });
      expect(delivered.headers).toMatchObject({
        'x-fal-webhook-request-id': id,
        'x-fal-webhook-user-id': fal.signing.userId,
        'x-fal-webhook-signature': expect.stringMatching(/^[0-9a-f]{128}$/),
      });
      expect(Math.abs(Number(delivered.headers['x-fal-webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(
        5,
      );
      expect(await verifies(delivered)).toBe(true);
      // The result read afterwards is the same output; reading never pushes again.
      const result = await call(`${fal.origin}/fal-ai/flux/requests/${id}`, { headers: key });
      expect(result.body.images[0].url).toBe(JSON.parse(delivered.body).payload.images[0].url);
      await fal.webhooks.settled();
      expect(fal.webhooks.attemptsFor(id)).toHaveLength(1);
    });

    it('an error result is pushed as ERROR; ends by polls, release and cancel push too; none without fal_webhook', async () => {
      fal.script({ error: falRequestError('request_timeout', 504) }, promptContains('broken'));
      const broken = (await submit({ prompt: 'broken' })).request_id;
      for (let i = 0; i < 3; i++)
        await call(`${fal.origin}/fal-ai/flux/requests/${broken}/status`, { headers: key });
      fal.script({ holdInQueue: true }, promptContains('held'));
      const held = (await submit({ prompt: 'held' })).request_id;
      fal.release(held);
      const cancelled = (await submit({ prompt: 'to cancel' })).request_id;
      await call(`${fal.origin}/fal-ai/flux/requests/${cancelled}/cancel`, { method: 'PUT', headers: key });
      const quiet = (
        await call(`${fal.origin}/fal-ai/flux/dev`, {
          method: 'POST',
          headers: key,
          json: { prompt: 'quiet' },
        })
      ).body.request_id;
      fal.release(quiet);
      await fal.webhooks.settledAfter(broken, held, cancelled);
      const pushed = (id: string) => fal.webhooks.attemptsFor(id).map((a) => JSON.parse(a.body));
      expect(pushed(broken)).toEqual([
        {
          request_id: broken,
          gateway_request_id: broken,
          status: 'ERROR',
          error: 'Invalid status code: 504',
          payload: { detail: 'request_timeout', error_type: 'request_timeout' },
        },
      ]);
      expect(pushed(held).map((d) => d.status)).toEqual(['OK']);
      expect(pushed(cancelled)).toEqual([
        expect.objectContaining({
          status: 'ERROR',
          payload: expect.objectContaining({ error_type: 'client_cancelled' }),
        }),
      ]);
      expect(pushed(quiet)).toEqual([]);
    });

    it('forged and replayed deliveries, and a rotated key the JWKS then lists', async () => {
      fal.defaultRunMs = 10;
      try {
        fal.webhooks.forge();
        const forged = (await submit({ prompt: 'forged' })).request_id;
        await fal.webhooks.settledAfter(forged);
        const [bad] = fal.webhooks.attemptsFor(forged);
        expect(bad!.kind).toBe('forged');
        expect(await verifies(bad!)).toBe(false);

        fal.webhooks.replay(1, 600);
        const replayed = (await submit({ prompt: 'replayed' })).request_id;
        await fal.webhooks.settledAfter(replayed);
        const [old] = fal.webhooks.attemptsFor(replayed);
        expect(Date.now() / 1000 - Number(old!.headers['x-fal-webhook-timestamp'])).toBeGreaterThan(590);
        expect(await verifies(old!)).toBe(true);

        fal.signing.rotate();
        expect((await call(fal.env().FAL_JWKS_URL!)).body.keys).toHaveLength(2);
        const rotated = (await submit({ prompt: 'rotated' })).request_id;
        await fal.webhooks.settledAfter(rotated);
        expect(await verifies(fal.webhooks.attemptsFor(rotated)[0]!)).toBe(true);
      } finally {
        fal.defaultRunMs = undefined;
      }
    });
  });
});
