import type { CommonQueryMethods } from 'slonik';
import { rotateWebhookSecret, webhookSecretOf, type WebhookSecretRow } from '../../db/webhook-secrets.js';
import { newWebhookSecret } from '../../net/webhook-signing.js';
import { principalOf } from '../auth-plugin.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/** How long a rotated-out secret keeps signing deliveries beside the new one. */
export const previousSecretKeptMs = 24 * 60 * 60 * 1000;

const shown = (row: WebhookSecretRow) => ({
  secret: row.secret,
  created_at: row.created_at,
  previous: row.previous && { secret: row.previous.secret, expires_at: row.previous.until },
});

/**
 * GET /v1/webhooks/secret (made on first read) and POST /v1/webhooks/secret/rotate (a new one; the
 * old one keeps signing for 24 h). Any key of the account reads it: it signs what the service
 * sends the account, and grants nothing. No store: the answer holds a secret.
 */
export function webhookRoutes(app: ZodApp, deps: { db: CommonQueryMethods }): void {
  app.get('/v1/webhooks/secret', { schema: routeSchemas.getWebhookSecret }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    return shown(await webhookSecretOf(deps.db, principalOf(request).accountId, newWebhookSecret()));
  });
  app.post(
    '/v1/webhooks/secret/rotate',
    { schema: routeSchemas.rotateWebhookSecret },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const accountId = principalOf(request).accountId;
      return shown(await rotateWebhookSecret(deps.db, accountId, newWebhookSecret(), previousSecretKeptMs));
    },
  );
}
