import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FalWebhookVerifier } from '../../src/providers/fal/fal-webhooks.js';
import { PushKeysUnavailable } from '../../src/providers/provider-webhooks.js';
import { ReplicateWebhookVerifier } from '../../src/providers/replicate/replicate-webhooks.js';
import { FalQueueServer } from '../support/providers/fal-queue-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';

/**
 * Verifying the providers' pushes, against the stand-ins' signing (their secret and JWKS served as
 * the providers serve them): what passes, what is refused, and when keys are fetched.
 */

/** A clock the test moves. */
const clock = () => {
  let now = Date.now();
  return { now: () => now, advance: (ms: number) => (now += ms) };
};

describe('Replicate webhook verification', () => {
  let replicate: ReplicateServer;
  const secretReads = () => replicate.requests.filter((r) => r.url === '/v1/webhooks/default/secret').length;
  const verifier = (time = clock()) =>
    new ReplicateWebhookVerifier({
      apiUrl: replicate.env().REPLICATE_API_URL!,
      token: replicate.token,
      now: time.now,
    });
  const delivery = (body: string, options?: { timestamp?: number; forged?: boolean }) => ({
    body: Buffer.from(body),
    headers: replicate.webhooks.sign('p1', body, options),
  });
  const prediction = JSON.stringify({ id: 'p1', status: 'succeeded', output: ['https://x.test/a.png'] });

  beforeAll(async () => {
    replicate = await ReplicateServer.start();
  });
  afterAll(() => replicate.close());

  it('verifies a signed prediction and names it; the secret is read once, with our token, and kept', async () => {
    const v = verifier();
    const before = secretReads();
    for (let i = 0; i < 3; i++) {
      const { headers, body } = delivery(prediction);
      expect(await v.verify(headers, body)).toEqual({ verified: true, jobId: 'p1' });
    }
    expect(secretReads() - before).toBe(1);
    expect(replicate.requests.at(-1)!.headers.authorization).toBe('Bearer [redacted]');
    expect(v.isJob('p1', 'p1')).toBe(true);
    expect(v.isJob('p2', 'p1')).toBe(false);
    // Neither the secret nor the token is to be seen on the object.
    expect(inspect(v, { depth: 10, showHidden: true })).not.toMatch(/whsec_|r8_test_token/);
  });

  it('refuses a forged signature, an old or future timestamp, a changed body, missing headers, and a body that is no prediction', async () => {
    const time = clock();
    const v = verifier(time);
    const forged = delivery(prediction, { forged: true });
    expect(await v.verify(forged.headers, forged.body)).toEqual({
      verified: false,
      reason: 'webhook-signature does not match the account’s secret',
    });
    const now = Math.floor(time.now() / 1000);
    for (const timestamp of [now - 301, now + 301]) {
      const replayed = delivery(prediction, { timestamp });
      expect(await v.verify(replayed.headers, replayed.body)).toMatchObject({
        verified: false,
        reason: expect.stringContaining('webhook-timestamp'),
      });
    }
    const within = delivery(prediction, { timestamp: now - 290 });
    expect((await v.verify(within.headers, within.body)).verified).toBe(true);
    const good = delivery(prediction);
    const changed = Buffer.from(good.body.toString().replace('succeeded', 'failed'));
    expect((await v.verify(good.headers, changed)).verified).toBe(false);
    const { 'webhook-signature': _dropped, ...unsigned } = good.headers;
    expect((await v.verify(unsigned, good.body)).verified).toBe(false);
    const notJson = delivery('not json');
    expect(await v.verify(notJson.headers, notJson.body)).toEqual({
      verified: false,
      reason: 'the body is not a prediction with an id',
    });
  });

  it('a rotated secret is read again on a failed verification, at most once a minute', async () => {
    const time = clock();
    const v = verifier(time);
    const first = delivery(prediction);
    expect((await v.verify(first.headers, first.body)).verified).toBe(true);
    replicate.signing.rotate();
    const before = secretReads();
    // Within the minute of the last read: forged or rotated, nothing is read again.
    for (let i = 0; i < 5; i++) {
      const rotated = delivery(prediction);
      expect((await v.verify(rotated.headers, rotated.body)).verified).toBe(false);
    }
    expect(secretReads()).toBe(before);
    time.advance(61_000);
    const rotated = delivery(prediction);
    expect((await v.verify(rotated.headers, rotated.body)).verified).toBe(true);
    const forged = delivery(prediction, { forged: true });
    expect((await v.verify(forged.headers, forged.body)).verified).toBe(false);
    expect(secretReads()).toBe(before + 1);
  });

  it('a secret that cannot be read (refused token, provider down) leaves the delivery unverified, saying nothing secret', async () => {
    const refusedToken = new ReplicateWebhookVerifier({
      apiUrl: replicate.env().REPLICATE_API_URL!,
      token: 'r8_wrong_token',
    });
    const { headers, body } = delivery(prediction);
    const error = (await refusedToken.verify(headers, body).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(PushKeysUnavailable);
    expect(error.message).toMatch(/HTTP 401/);
    expect(error.message).not.toContain('r8_wrong_token');
    const down = new ReplicateWebhookVerifier({
      apiUrl: 'http://127.0.0.1:9/v1',
      token: 't',
      timeoutMs: 500,
    });
    await expect(down.verify(headers, body)).rejects.toBeInstanceOf(PushKeysUnavailable);
  });
});

describe('fal webhook verification', () => {
  let fal: FalQueueServer;
  const jwksReads = () => fal.requests.filter((r) => r.url === '/.well-known/jwks.json').length;
  const verifier = (time = clock()) =>
    new FalWebhookVerifier({ jwksUrl: fal.env().FAL_JWKS_URL!, now: time.now });
  const payload = (requestId: string) =>
    JSON.stringify({
      request_id: requestId,
      gateway_request_id: requestId,
      status: 'OK',
      payload: { images: [] },
    });
  const delivery = (
    requestId: string,
    body = payload(requestId),
    options?: { timestamp?: number; forged?: boolean },
  ) => ({
    body: Buffer.from(body),
    headers: fal.webhooks.sign(requestId, body, options),
  });

  beforeAll(async () => {
    fal = await FalQueueServer.start();
  });
  afterAll(() => fal.close());

  it('verifies a signed delivery and names its request; the JWKS is read once and kept up to 24 hours', async () => {
    const time = clock();
    const v = verifier(time);
    const before = jwksReads();
    for (let i = 0; i < 3; i++) {
      const { headers, body } = delivery('r-1');
      expect(await v.verify(headers, body)).toEqual({ verified: true, jobId: 'r-1' });
    }
    expect(jwksReads() - before).toBe(1);
    time.advance(24 * 3_600_000);
    const { headers, body } = delivery('r-1', undefined, { timestamp: Math.floor(time.now() / 1000) });
    expect((await v.verify(headers, body)).verified).toBe(true);
    expect(jwksReads() - before).toBe(2);
    expect(v.isJob('fal-ai/flux/dev::r-1::1767225600000', 'r-1')).toBe(true);
    expect(v.isJob('fal-ai/flux/dev::r-1', 'r-1')).toBe(true);
    expect(v.isJob('fal-ai/flux/dev::r-2::1767225600000', 'r-1')).toBe(false);
    expect(v.isJob('not a job id', 'r-1')).toBe(false);
  });

  it('refuses a forged signature, an old timestamp, a changed body, and a body naming another request', async () => {
    const time = clock();
    const v = verifier(time);
    const forged = delivery('r-2', undefined, { forged: true });
    expect(await v.verify(forged.headers, forged.body)).toEqual({
      verified: false,
      reason: 'no key of fal’s JWKS verifies the signature',
    });
    const replayed = delivery('r-2', undefined, { timestamp: Math.floor(time.now() / 1000) - 400 });
    expect(await v.verify(replayed.headers, replayed.body)).toMatchObject({
      verified: false,
      reason: expect.stringContaining('Timestamp'),
    });
    const good = delivery('r-2');
    expect((await v.verify(good.headers, Buffer.from(`${good.body.toString()} `))).verified).toBe(false);
    // Signed for the header's request, but the body says another one: not trusted.
    const other = delivery('r-2', payload('r-3'));
    expect(await v.verify(other.headers, other.body)).toEqual({
      verified: false,
      reason: 'the body’s request_id is not the one X-Fal-Webhook-Request-Id names',
    });
    expect((await v.verify({ ...good.headers, 'x-fal-webhook-signature': 'zz' }, good.body)).verified).toBe(
      false,
    );
  });

  it('a key fal added since is fetched on a failed verification, at most once a minute', async () => {
    const time = clock();
    const v = verifier(time);
    const first = delivery('r-4');
    expect((await v.verify(first.headers, first.body)).verified).toBe(true);
    fal.signing.rotate(false);
    const before = jwksReads();
    for (let i = 0; i < 5; i++) {
      const { headers, body } = delivery('r-4');
      expect((await v.verify(headers, body)).verified).toBe(false);
    }
    expect(jwksReads()).toBe(before);
    time.advance(61_000);
    const { headers, body } = delivery('r-4');
    expect((await v.verify(headers, body)).verified).toBe(true);
    expect(jwksReads()).toBe(before + 1);
  });

  it('a JWKS that cannot be had leaves the delivery unverified', async () => {
    const down = new FalWebhookVerifier({ jwksUrl: 'http://127.0.0.1:9/jwks.json', timeoutMs: 500 });
    const { headers, body } = delivery('r-5');
    await expect(down.verify(headers, body)).rejects.toBeInstanceOf(PushKeysUnavailable);
    const notJwks = new FalWebhookVerifier({ jwksUrl: `${fal.origin}/files/none` });
    await expect(notJwks.verify(headers, body)).rejects.toBeInstanceOf(PushKeysUnavailable);
  });
});
