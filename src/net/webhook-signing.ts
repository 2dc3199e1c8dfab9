import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks 1.0 (https://www.standardwebhooks.com): an account's signing secret, and the
 * headers that sign one delivery. The signature covers the exact bytes sent, never a re-serialized
 * copy: a receiver verifies what it received.
 */

/** Random bytes in a secret: the spec asks for 24 to 64. */
const secretBytes = 32;
const secretPattern = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/** A new secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(secretBytes).toString('base64')}`;
}

/** The HMAC key of a secret: the base64-decoded part after `whsec_`. */
export function webhookSigningKey(secret: string): Buffer {
  const match = secretPattern.exec(secret);
  if (!match) throw new Error('a webhook secret is whsec_ followed by base64');
  return Buffer.from(match[1]!, 'base64');
}

export interface WebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The headers of one delivery attempt of `body` (the bytes that will be sent) with message id
 * `id` (the same on every retry of one delivery), at `timestamp` (seconds since the epoch), signed
 * with each of `secrets` (after a rotation, the new and the previous one): `v1,<base64>` each,
 * space-separated, as the spec allows.
 */
export function signWebhook(
  message: { id: string; timestamp: number; body: string | Buffer },
  secrets: readonly string[],
): WebhookHeaders {
  if (secrets.length === 0) throw new Error('signWebhook: no secret to sign with');
  if (!Number.isInteger(message.timestamp)) throw new Error('signWebhook: the timestamp is whole seconds');
  const signed = Buffer.concat([
    Buffer.from(`${message.id}.${message.timestamp}.`, 'utf8'),
    typeof message.body === 'string' ? Buffer.from(message.body, 'utf8') : message.body,
  ]);
  return {
    'webhook-id': message.id,
    'webhook-timestamp': String(message.timestamp),
    'webhook-signature': secrets
      .map(
        (secret) => `v1,${createHmac('sha256', webhookSigningKey(secret)).update(signed).digest('base64')}`,
      )
      .join(' '),
  };
}
