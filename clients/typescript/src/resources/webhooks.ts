import type { HttpCore } from '../core/http.js';
import type { WebhookSecret } from '../types.js';
import { unwrap, verify } from '../webhooks.js';

/**
 * client.webhooks: the account's signing secret (`secret()`, made on its first read;
 * `rotateSecret()`), and `verify` / `unwrap` of a delivery (no request: also usable without a
 * client, as `webhooks` or `verifyWebhook`).
 */
export class Webhooks {
  readonly verify = verify;
  readonly unwrap = unwrap;

  constructor(private readonly http: HttpCore) {}

  /** GET /v1/webhooks/secret: `{secret, created_at, previous}` (`previous` signs too for 24 h after a rotation). */
  async secret(options: { signal?: AbortSignal } = {}): Promise<WebhookSecret> {
    return (
      await this.http.request<WebhookSecret>({
        method: 'GET',
        path: '/webhooks/secret',
        signal: options.signal,
      })
    ).data;
  }

  /** POST /v1/webhooks/secret/rotate: a new secret; the replaced one is `previous` and signs too for 24 h. */
  async rotateSecret(options: { signal?: AbortSignal } = {}): Promise<WebhookSecret> {
    return (
      await this.http.request<WebhookSecret>({
        method: 'POST',
        path: '/webhooks/secret/rotate',
        signal: options.signal,
      })
    ).data;
  }
}
