import type { FastifyInstance } from 'fastify';
import { createApiKey } from '../../auth/api-key-issuer.js';
import { KeyCreationRefused, listApiKeys, revokeApiKey } from '../../db/api-keys-repository.js';
import { keysLastUsed } from '../../db/console-reads.js';
import { endSessionsOfKey } from '../../db/console-sessions.js';
import { formField, SESSION_COOKIE } from '../request-fields.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

/** API keys: list, create (the plaintext shown once), revoke. The 5-key limit is the repository's (and the table's). */
export function keyRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  const page = async (accountId: string, extra: Record<string, unknown>) => {
    const [keys, lastUsed] = await Promise.all([
      listApiKeys(deps.db, accountId),
      keysLastUsed(deps.db, accountId),
    ]);
    return {
      title: 'API keys',
      keys: keys.map((k) => ({ ...k, last_used: lastUsed.get(k.id) ?? null })),
      active: keys.filter((k) => !k.revoked_at).length,
      format,
      created: null,
      message: null,
      ...extra,
    };
  };

  app.get('/keys', async (request, reply) =>
    sendPage(request, reply, 'keys', await page(userOf(request).accountId, {})),
  );

  app.post('/keys', async (request, reply) => {
    const user = userOf(request);
    const name = (formField(request.body, 'name') ?? '').trim().slice(0, 100) || undefined;
    try {
      const { key, record } = await createApiKey(deps.db, { accountId: user.accountId, name });
      // Shown in this answer only (never stored, never cached: cache-control no-store).
      return sendPage(request, reply, 'keys', await page(user.accountId, { created: { key, record } }), 201);
    } catch (error) {
      if (!(error instanceof KeyCreationRefused)) throw error;
      return sendPage(request, reply, 'keys', await page(user.accountId, { message: error.message }), 409);
    }
  });

  app.post<{ Params: { id: string } }>('/keys/:id/revoke', async (request, reply) => {
    const user = userOf(request);
    const owned = (await listApiKeys(deps.db, user.accountId)).find((k) => k.id === request.params.id);
    if (!owned) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    await revokeApiKey(deps.db, owned.id);
    await endSessionsOfKey(deps.db, owned.id);
    if (owned.id === user.keyId) {
      const ended = 'Your session has ended: you revoked the key it was opened with.';
      return reply
        .clearCookie(SESSION_COOKIE, deps.cookie)
        .redirect(`/sign-in?ended=${encodeURIComponent(ended)}`, 303);
    }
    return reply.redirect('/keys', 303);
  });
}
