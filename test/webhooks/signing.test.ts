import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  verifyWebhook,
  unwrapWebhook,
  WebhookVerificationError,
} from '../../clients/typescript/src/index.js';
import { newWebhookSecret, signWebhook, webhookSigningKey } from '../../src/net/webhook-signing.js';

/**
 * The server's signer (src/webhook-signing.ts) and the TypeScript client's verifier, each against
 * the reference implementation of Standard Webhooks 1.0 (the `standardwebhooks` package).
 */
describe('webhook signatures (Standard Webhooks 1.0)', () => {
  const event = {
    id: 3,
    type: 'generation.succeeded',
    created_at: '2026-11-26T23:00:00.000Z',
    data: { id: 'gen_abc', status: 'succeeded', prompt: 'ünïcode — and "quotes"' },
  };
  // Bytes as sent: spacing a re-serializer would not keep, and text beyond ASCII.
  const body = JSON.stringify(event, null, 1);
  const now = () => Math.floor(Date.now() / 1000);

  it('a secret is whsec_ + base64 of at least 24 random bytes, each one new', () => {
    const a = newWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(webhookSigningKey(a).length).toBeGreaterThanOrEqual(24);
    expect(newWebhookSecret()).not.toBe(a);
  });

  it('what the server signs, the reference verifies (over the exact bytes); a changed byte fails', () => {
    const secret = newWebhookSecret();
    const headers = signWebhook({ id: 'msg_1', timestamp: now(), body }, [secret]);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(event);
    expect(() => new Webhook(secret).verify(body.replace('succeeded', 'failed'), { ...headers })).toThrow();
    expect(() => new Webhook(newWebhookSecret()).verify(body, { ...headers })).toThrow();
  });

  it('after a rotation both signatures are sent, space-separated; the reference takes either secret', () => {
    const [fresh, previous] = [newWebhookSecret(), newWebhookSecret()];
    const headers = signWebhook({ id: 'msg_2', timestamp: now(), body }, [fresh, previous]);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const secret of [fresh, previous])
      expect(new Webhook(secret).verify(body, { ...headers })).toEqual(event);
    // Byte for byte what the reference makes with the same inputs.
    const at = new Date(Number(headers['webhook-timestamp']) * 1000);
    expect(headers['webhook-signature']).toBe(
      `${new Webhook(fresh).sign('msg_2', at, body)} ${new Webhook(previous).sign('msg_2', at, body)}`,
    );
  });

  it('what the reference signs, the client verifies; tampered, stale, unsigned or foreign fails', async () => {
    const secret = newWebhookSecret();
    const reference = new Webhook(secret);
    const stamp = (seconds: number, text = body) => ({
      'webhook-id': 'msg_3',
      'webhook-timestamp': String(seconds),
      'webhook-signature': reference.sign('msg_3', new Date(seconds * 1000), text),
    });
    await expect(verifyWebhook(body, stamp(now()), secret)).resolves.toBeUndefined();
    // Raw bytes and a Fetch Headers object are read the same way.
    await expect(
      verifyWebhook(new TextEncoder().encode(body), new Headers(stamp(now())), secret),
    ).resolves.toBeUndefined();
    expect(await unwrapWebhook(body, stamp(now()), secret)).toEqual(event);
    const failures = [
      () => verifyWebhook(body.replace('abc', 'abd'), stamp(now()), secret), // tampered body
      () => verifyWebhook(body, stamp(now() - 301), secret), // stale: past the 5-minute tolerance
      () => verifyWebhook(body, stamp(now() + 301), secret), // from the future
      () => verifyWebhook(body, { ...stamp(now()), 'webhook-signature': 'v1,AAAA' }, secret),
      () => verifyWebhook(body, { ...stamp(now()), 'webhook-id': 'msg_other' }, secret), // the id is signed too
      () => verifyWebhook(body, stamp(now()), newWebhookSecret()), // another secret
      () => verifyWebhook(body, { 'webhook-id': 'msg_3' }, secret), // headers missing
    ];
    for (const failure of failures) await expect(failure()).rejects.toBeInstanceOf(WebhookVerificationError);
    // Within the tolerance it passes, as the reference does.
    expect(() => reference.verify(body, stamp(now() - 290))).not.toThrow();
    await expect(verifyWebhook(body, stamp(now() - 290), secret)).resolves.toBeUndefined();
  });

  it('rotated secrets: the client passes a delivery when any one signature matches its secret', async () => {
    const [fresh, previous] = [newWebhookSecret(), newWebhookSecret()];
    const headers = signWebhook({ id: 'msg_4', timestamp: now(), body }, [fresh, previous]);
    await expect(verifyWebhook(body, { ...headers }, previous)).resolves.toBeUndefined();
    await expect(verifyWebhook(body, { ...headers }, fresh)).resolves.toBeUndefined();
    // Signed by the reference with the old secret only, and the receiver already on the new one: refused.
    const old = signWebhook({ id: 'msg_4', timestamp: now(), body }, [previous]);
    await expect(verifyWebhook(body, { ...old }, fresh)).rejects.toBeInstanceOf(WebhookVerificationError);
  });
});
