import type { FastifyInstance } from 'fastify';
import { findGrant, listGrants, revokeGrantRecord } from '../../db/oauth-grants-repository.js';
import { format, sendPage } from '../render.js';
import { userOf } from '../request-fields.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { appIdentity } from './oauth-routes.js';

/**
 * Connected apps: the chat apps the account approved through OAuth, each with when it was approved
 * and last called, and Revoke, which ends its access and refresh tokens at once.
 */
export function connectedAppsRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.get('/apps', async (request, reply) => {
    const grants = await listGrants(deps.db, userOf(request).accountId);
    return sendPage(request, reply, 'connected-apps', {
      title: 'Connected apps',
      apps: grants.map((g) => ({
        ...g,
        identity: appIdentity({ clientName: g.client_name ?? undefined }, g.client_id),
      })),
      format,
    });
  });

  app.post<{ Params: { id: string } }>('/apps/:id/revoke', async (request, reply) => {
    const grant = await findGrant(deps.db, userOf(request).accountId, request.params.id);
    if (!grant) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    await revokeGrantRecord(deps.db, grant.grant_id);
    return reply.redirect('/apps', 303);
  });
}
