import { timingSafeEqual } from 'node:crypto';
import { signWebhook, webhookSigningKey } from '../../webhook-signing.js';
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

/**
 * Replicate's webhooks (https://replicate.com/docs/topics/webhooks/verify-webhook): Standard
 * Webhooks 1.0, signed with the account's secret. A delivery has `webhook-id`, `webhook-timestamp`
 * (seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, several
 * space-separated when Replicate signs with more than one); its body is the prediction. The secret
 * (`whsec_…`) is `GET {REPLICATE_API_URL}/webhooks/default/secret` with our token (`{ "key": … }`),
 * fetched when first needed and kept; fetched again (at most once a minute) when a delivery fails
 * to verify with it, for a secret rotated since. The secret never leaves this object: no log line,
 * no error message.
 */
export interface ReplicateWebhookOptions extends KeyCacheOptions {
  /** REPLICATE_API_URL. */
  apiUrl: string;
  /** REPLICATE_API_TOKEN. */
  token: string;
  /** Deadline of the secret's fetch (default 5 s). */
  timeoutMs?: number;
}

export class ReplicateWebhookVerifier implements PushVerifier {
  private readonly secret: KeyCache<string>;
  private readonly now: () => number;

  constructor(options: ReplicateWebhookOptions) {
    const { apiUrl, token, timeoutMs = 5_000, ...cache } = options;
    const url = `${apiUrl.replace(/\/+$/, '')}/webhooks/default/secret`;
    this.now = cache.now ?? Date.now;
    this.secret = new KeyCache(async () => {
      const body = await fetchKeys(url, {
        headers: { authorization: `Bearer ${token}` },
        timeoutMs,
        what: 'Replicate’s webhook secret',
      });
      const key = (body as { key?: unknown } | null)?.key;
      if (typeof key !== 'string' || !isSecret(key))
        throw new PushKeysUnavailable(`Replicate’s webhook secret (${url}) is not a whsec_ secret`);
      return key;
    }, cache);
  }

  async verify(
    headers: Readonly<Record<string, string | string[] | undefined>>,
    body: Buffer,
  ): Promise<PushVerdict> {
    const id = headerOf(headers, 'webhook-id');
    const timestamp = headerOf(headers, 'webhook-timestamp');
    const signatures = headerOf(headers, 'webhook-signature');
    if (!id || !timestamp || !signatures)
      return refused('missing webhook-id, webhook-timestamp or webhook-signature');
    if (!timestampWithin(timestamp, this.now()))
      return refused('webhook-timestamp is not within 5 minutes of now');
    const message = { id, timestamp: Number(timestamp), body };
    const secret = await this.secret.current();
    if (!signedWith(secret, message, signatures)) {
      // A secret rotated since we fetched it: fetched again, at most once a minute.
      const fresh = await this.secret.refreshed().catch(() => undefined);
      if (fresh === undefined || fresh === secret || !signedWith(fresh, message, signatures))
        return refused('webhook-signature does not match the account’s secret');
    }
    const prediction = jsonOf(body) as { id?: unknown } | undefined;
    if (typeof prediction?.id !== 'string' || prediction.id === '')
      return refused('the body is not a prediction with an id');
    return { verified: true, jobId: prediction.id };
  }

  /** Replicate's job is its prediction id as it is. */
  isJob(recordedJobId: string, jobId: string): boolean {
    return recordedJobId === jobId;
  }
}

const refused = (reason: string): PushVerdict => ({ verified: false, reason });

function isSecret(key: string): boolean {
  try {
    return webhookSigningKey(key).length > 0;
  } catch {
    return false;
  }
}

/** Whether one of the header's `v1,…` signatures is the secret's over this message (compared in constant time). */
function signedWith(
  secret: string,
  message: { id: string; timestamp: number; body: Buffer },
  signatures: string,
): boolean {
  const expected = Buffer.from(signWebhook(message, [secret])['webhook-signature']);
  return signatures
    .split(' ')
    .map((signature) => Buffer.from(signature))
    .some((given) => given.length === expected.length && timingSafeEqual(given, expected));
}
