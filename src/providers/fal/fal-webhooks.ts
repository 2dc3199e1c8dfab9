import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import {
  fetchKeys,
  headerOf,
  jsonOf,
  KeyCache,
  PushKeysUnavailable,
  timestampWithin,
  type KeyCacheOptions,
  type PushVerdict,
  type PushVerifier,
} from '../provider-webhooks.js';
import { requestIdOf } from './fal-queue-provider.js';

/**
 * fal's webhooks (https://docs.fal.ai/model-apis/model-endpoints/webhooks): a delivery's body is
 * `{ request_id, gateway_request_id, status: "OK" | "ERROR", payload, error? }`, with
 * `X-Fal-Webhook-Request-Id`, `-User-Id`, `-Timestamp` (seconds) and `-Signature`: hex ED25519
 * over `request_id \n user_id \n timestamp \n sha256hex(body)`, by one of the keys of fal's JWKS
 * (FAL_JWKS_URL). The keys are fetched when first needed and kept up to 24 hours (as fal's docs
 * allow); a delivery no key verifies has them fetched again, at most once a minute (a key fal added
 * since). fal signs every account's deliveries with the same keys: the signature proves fal sent
 * it, and the route's match of the request id against the generation's recorded job proves it is ours.
 */
export interface FalWebhookOptions extends KeyCacheOptions {
  /** FAL_JWKS_URL. */
  jwksUrl: string;
  /** Deadline of the JWKS's fetch (default 5 s). */
  timeoutMs?: number;
}

const dayMs = 24 * 3_600_000;

export class FalWebhookVerifier implements PushVerifier {
  private readonly keys: KeyCache<KeyObject[]>;
  private readonly now: () => number;

  constructor(options: FalWebhookOptions) {
    const { jwksUrl, timeoutMs = 5_000, ...cache } = options;
    this.now = cache.now ?? Date.now;
    this.keys = new KeyCache(
      async () => publicKeys(await fetchKeys(jwksUrl, { timeoutMs, what: 'fal’s webhook keys' }), jwksUrl),
      { maxAgeMs: dayMs, ...cache },
    );
  }

  async verify(
    headers: Readonly<Record<string, string | string[] | undefined>>,
    body: Buffer,
  ): Promise<PushVerdict> {
    const requestId = headerOf(headers, 'x-fal-webhook-request-id');
    const userId = headerOf(headers, 'x-fal-webhook-user-id');
    const timestamp = headerOf(headers, 'x-fal-webhook-timestamp');
    const signature = headerOf(headers, 'x-fal-webhook-signature');
    if (!requestId || !userId || !timestamp || !signature)
      return refused('missing X-Fal-Webhook-Request-Id, -User-Id, -Timestamp or -Signature');
    if (!timestampWithin(timestamp, this.now()))
      return refused('X-Fal-Webhook-Timestamp is not within 5 minutes of now');
    if (!/^[0-9a-f]{128}$/i.test(signature))
      return refused('X-Fal-Webhook-Signature is not a hex ED25519 signature');
    const digest = createHash('sha256').update(body).digest('hex');
    const message = Buffer.from(`${requestId}\n${userId}\n${timestamp}\n${digest}`, 'utf8');
    const signed = Buffer.from(signature, 'hex');
    const signedBy = (keys: KeyObject[]) => keys.some((key) => verify(null, message, key, signed));
    const keys = await this.keys.current();
    if (!signedBy(keys)) {
      const fresh = await this.keys.refreshed().catch(() => undefined);
      if (fresh === undefined || !signedBy(fresh))
        return refused('no key of fal’s JWKS verifies the signature');
    }
    const said = jsonOf(body) as { request_id?: unknown } | undefined;
    if (said?.request_id !== requestId)
      return refused('the body’s request_id is not the one X-Fal-Webhook-Request-Id names');
    return { verified: true, jobId: requestId };
  }

  /** Our fal job ids are `{model}::{request_id}[::{enqueued at}]`. */
  isJob(recordedJobId: string, jobId: string): boolean {
    return requestIdOf(recordedJobId) === jobId;
  }
}

const refused = (reason: string): PushVerdict => ({ verified: false, reason });

/** The ED25519 keys of a JWKS (`{ keys: [{ kty: "OKP", crv: "Ed25519", x }] }`); none is an error. */
function publicKeys(jwks: unknown, url: string): KeyObject[] {
  const listed = (jwks as { keys?: unknown } | null)?.keys;
  const keys: KeyObject[] = [];
  for (const jwk of Array.isArray(listed) ? listed : []) {
    const { kty, crv, x } = (jwk ?? {}) as Record<string, unknown>;
    if (kty !== 'OKP' || crv !== 'Ed25519' || typeof x !== 'string') continue;
    try {
      keys.push(createPublicKey({ key: { kty, crv, x }, format: 'jwk' }));
    } catch {
      // A key Node cannot read is one fal cannot have signed with for us: skipped.
    }
  }
  if (keys.length === 0) throw new PushKeysUnavailable(`fal’s JWKS (${url}) lists no ED25519 key`);
  return keys;
}
