import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import {
  RequestLimiter,
  replicateRequestKind,
  replicateThrottled,
} from '../support/providers/fake-rate-limits.js';
import { call, download } from '../support/providers/plain-fetch.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';

// The fakes' request counts by kind and their rate limits (fake-rate-limits.ts), with plain fetch.

describe('provider fakes: requests by kind and rate limits', () => {
  const closing: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((server) => server.close()));
  });

  it("Replicate past its limits: 429 with Retry-After and Replicate's body, counted apart; files never limited", async () => {
    const replicate = await ReplicateServer.start({ limits: { createsPerMinute: 2, requestsPerMinute: 3 } });
    closing.push(replicate);
    const api = replicate.env().REPLICATE_API_URL!;
    const auth = { authorization: 'Bearer r8_test_token' };
    const create = () =>
      call(`${api}/models/black-forest-labs/flux-schnell/predictions`, {
        method: 'POST',
        headers: auth,
        json: { input: { prompt: 'a fox' } },
      });
    const created = [await create(), await create(), await create()];
    expect(created.map((c) => c.status)).toEqual([201, 201, 429]);
    expect(created[2]!.body).toEqual({
      title: 'Request was throttled.',
      detail: 'Request was throttled. Expected available in 60 seconds.',
      status: 429,
    });
    expect(Number(created[2]!.headers.get('retry-after'))).toBe(60);
    // A throttled create never reached Replicate: no prediction.
    expect([replicate.creates, replicate.accepted().length]).toEqual([2, 2]);

    const get = created[0]!.body.urls.get as string;
    const reads = [];
    for (let i = 0; i < 3; i++) reads.push(await call(get, { headers: auth }));
    expect(reads.map((r) => [r.status, r.body.status])).toEqual([
      [200, 'starting'],
      [200, 'processing'],
      [200, 'succeeded'],
    ]);
    const fourth = await call(`${created[1]!.body.urls.cancel}`, { method: 'POST', headers: auth });
    expect([fourth.status, fourth.headers.get('retry-after')]).toEqual([429, '60']);
    // Result files are served by Replicate's file host, not its API: neither limited nor limiting.
    expect((await download(reads[2]!.body.output[0])).status).toBe(200);

    expect(replicate.limiter.counts).toEqual({
      create: 3,
      status: 3,
      result: 0,
      cancel: 1,
      file: 1,
      other: 0,
    });
    expect(replicate.limiter.throttled).toMatchObject({ create: 1, status: 0, cancel: 1, file: 0 });
  });

  it('Replicate without limits (the default) answers everything and still counts by kind', async () => {
    const replicate = await ReplicateServer.start();
    closing.push(replicate);
    const api = replicate.env().REPLICATE_API_URL!;
    const auth = { authorization: 'Bearer r8_test_token' };
    for (let i = 0; i < 5; i++) expect((await call(`${api}/account`, { headers: auth })).status).toBe(200);
    expect(replicate.limiter.counts.other).toBe(5);
    expect(Object.values(replicate.limiter.throttled).every((n) => n === 0)).toBe(true);
  });

  it('fal counts submit, status, result, cancel and file apart, and refuses past a rate it is given', async () => {
    const fal = await FalQueueServer.start({ limits: { requestsPerMinute: 3 } });
    closing.push(fal);
    const key = { authorization: 'Key fal-test-key' };
    const submit = await call(`${fal.origin}/fal-ai/flux/dev`, {
      method: 'POST',
      headers: key,
      json: { prompt: 'a cat' },
    });
    const { status_url: status, response_url: result, cancel_url: cancel } = submit.body;
    expect((await call(status, { headers: key })).body.status).toBe('IN_QUEUE');
    expect((await call(status, { headers: key })).body.status).toBe('IN_PROGRESS');
    expect((await call(status, { headers: key })).body.status).toBe('COMPLETED');
    const refused = await call(result, { headers: key });
    expect([refused.status, refused.body, refused.headers.get('retry-after')]).toEqual([
      429,
      { detail: 'Rate limit exceeded' },
      '60',
    ]);
    expect((await call(cancel, { method: 'PUT', headers: key })).status).toBe(429);
    expect(fal.limiter.counts).toEqual({ create: 1, status: 3, result: 1, cancel: 1, file: 0, other: 0 });
    expect(fal.limiter.throttled).toMatchObject({ create: 0, status: 0, result: 1, cancel: 1 });
  });

  it('a window slides: a place frees when its oldest request is a window old, and Retry-After says when', () => {
    let now = 0;
    const limiter = new RequestLimiter(
      replicateRequestKind,
      { requestsPerMinute: 2, windowMs: 1_000 },
      replicateThrottled,
      () => now,
    );
    const answers: Array<{ status: number; retryAfter?: string }> = [];
    const read = (at: number) => {
      now = at;
      const response = {
        writeHead: (status: number, headers: Record<string, string>) =>
          answers.push({ status, retryAfter: headers['retry-after'] }),
        end: () => undefined,
      } as unknown as http.ServerResponse;
      const request = { method: 'GET', url: '/v1/predictions/abc' } as http.IncomingMessage;
      return limiter.refuses(request, response);
    };
    expect([read(0), read(600), read(700)]).toEqual([false, false, true]);
    expect(answers).toEqual([{ status: 429, retryAfter: '1' }]);
    // At 1,000 ms the read at 0 leaves the window; the one at 600 is still in it until 1,600.
    expect([read(1_000), read(1_500), read(1_600)]).toEqual([false, true, false]);
    expect([limiter.counts.status, limiter.throttled.status]).toEqual([6, 2]);
  });
});
