import type { FastifyInstance } from 'fastify';
import { limitsReachedNow, listKeyStates, setKeyRules } from '../../db/key-limits.js';
import { findGrant, listGrants, revokeGrantRecord } from '../../db/oauth-grants-repository.js';
import { format, sendPage } from '../render.js';
import { userOf } from '../request-fields.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { appIdentity } from './oauth-consent.js';
import { keyRulesView, manageRefusal, rulesOfForm } from './key-rules-form.js';

/**
 * Connected apps: the chat apps the account approved through OAuth, each with when it was approved
 * and last called, its limits (its key's rules: a spend limit, models, access) and their change,
 * and Revoke, which ends its access and refresh tokens at once.
 */
export function connectedAppsRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  const page = async (accountId: string, message: string | null = null) => {
    const [grants, keys, reached] = await Promise.all([
      listGrants(deps.db, accountId),
      listKeyStates(deps.db, accountId, 'oauth'),
      limitsReachedNow(deps.db, accountId),
    ]);
    const keyOf = new Map(keys.map((k) => [k.id, k]));
    return {
      title: 'Connected apps',
      apps: grants.map((g) => {
        const key = keyOf.get(g.api_key_id);
        return {
          ...g,
          identity: appIdentity({ clientName: g.client_name ?? undefined }, g.client_id),
          rules: key ? keyRulesView(key, reached.get(key.id) ?? null) : null,
        };
      }),
      message,
      format,
    };
  };

  app.get('/apps', async (request, reply) =>
    sendPage(request, reply, 'connected-apps', await page(userOf(request).accountId)),
  );

  /** Changes an app's limits (its key's rules): from its next call on. */
  app.post<{ Params: { id: string } }>('/apps/:id/rules', async (request, reply) => {
    const user = userOf(request);
    const grant = await findGrant(deps.db, user.accountId, request.params.id);
    if (!grant) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    const refusal = await manageRefusal(deps.db, user);
    if (refusal) return sendPage(request, reply, 'connected-apps', await page(user.accountId, refusal), 403);
    const rules = rulesOfForm(request.body);
    if (!rules.ok)
      return sendPage(request, reply, 'connected-apps', await page(user.accountId, rules.message), 400);
    await setKeyRules(deps.db, grant.api_key_id, rules.rules, user.accountId);
    return reply.redirect('/apps', 303);
  });

  app.post<{ Params: { id: string } }>('/apps/:id/revoke', async (request, reply) => {
    const grant = await findGrant(deps.db, userOf(request).accountId, request.params.id);
    if (!grant) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    await revokeGrantRecord(deps.db, grant.grant_id);
    return reply.redirect('/apps', 303);
  });
}
