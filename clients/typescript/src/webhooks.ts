import { GenerationClientError } from './core/errors.js';
import type { GenerationEvent } from './types.js';

/**
 * Verifying a webhook delivery, per Standard Webhooks 1.0: `webhook-signature` holds one or more
 * `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">` (two for a day after the
 * secret was rotated); one that matches, over the exact bytes received, with a timestamp within
 * 5 minutes of now, passes. WebCrypto only (no Node built-ins): Node 20+, Bun, Deno.
 */

/** The delivery is not one the secret signed, or not a recent one: answer it 4xx and ignore it. */
export class WebhookVerificationError extends GenerationClientError {}

/** Request headers as frameworks hand them: a Fetch `Headers`, or Node's lower-cased record. */
export type WebhookRequestHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far the timestamp may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The time to compare with, for tests (default: now). */
  now?: Date;
}

const encoder = new TextEncoder();

function header(headers: WebhookRequestHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value.join(' ') : value;
}

function base64Bytes(text: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** The HMAC key of a `whsec_…` secret: the base64-decoded part after the prefix. */
async function keyOf(secret: string) {
  const raw = base64Bytes(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  if (!raw || raw.length === 0) throw new TypeError('a webhook secret is whsec_ followed by base64');
  return crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
}

/**
 * Throws WebhookVerificationError unless `body` (the raw bytes or text received, never a parsed and
 * re-serialized copy) carries a valid signature by `secret`, made within the tolerance.
 */
export async function verify(
  body: string | Uint8Array,
  headers: WebhookRequestHeaders,
  secret: string,
  options: VerifyOptions = {},
): Promise<void> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures)
    throw new WebhookVerificationError(
      'The webhook-id, webhook-timestamp and webhook-signature headers are required.',
    );
  if (!/^\d{1,15}$/.test(timestamp))
    throw new WebhookVerificationError('The webhook-timestamp is not a number.');
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (Math.abs(now - Number(timestamp)) > tolerance)
    throw new WebhookVerificationError(
      'The webhook-timestamp is too far from now (a replay, or a clock off).',
    );
  const bytes = typeof body === 'string' ? encoder.encode(body) : body;
  const prefix = encoder.encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + bytes.length);
  signed.set(prefix);
  signed.set(bytes, prefix.length);
  const key = await keyOf(secret);
  for (const candidate of signatures.split(' ')) {
    const [version, value] = candidate.split(',', 2);
    if (version !== 'v1' || !value) continue;
    const signature = base64Bytes(value);
    // subtle.verify compares in constant time.
    if (signature && (await crypto.subtle.verify('HMAC', key, signature, signed))) return;
  }
  throw new WebhookVerificationError(
    'No signature matches: not signed with this secret, or the body was changed.',
  );
}

/** verify, then the event the body holds. */
export async function unwrap(
  body: string | Uint8Array,
  headers: WebhookRequestHeaders,
  secret: string,
  options: VerifyOptions = {},
): Promise<GenerationEvent> {
  await verify(body, headers, secret, options);
  const text = typeof body === 'string' ? body : new TextDecoder().decode(body);
  return JSON.parse(text) as GenerationEvent;
}

/** `client.webhooks`, also usable without a client (a receiver needs only the secret). */
export const webhooks = { verify, unwrap };
