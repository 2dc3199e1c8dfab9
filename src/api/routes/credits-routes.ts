import type { FastifyInstance } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import { getBalance, type CreditBalance } from '../../db/credits-repository.js';
import type { InvalidatedCache } from '../../db/invalidated-cache.js';
import { principalOf } from '../auth-plugin.js';

/** GET /v1/credits: the balance; works at zero. Served from a cache that every balance change invalidates. */
export function creditsRoutes(
  app: FastifyInstance,
  deps: { db: CommonQueryMethods; balances: InvalidatedCache<string, CreditBalance> },
): void {
  app.get('/v1/credits', (request) => {
    const accountId = principalOf(request).accountId;
    return deps.balances.peek(accountId) ?? deps.balances.get(accountId, (id) => getBalance(deps.db, id));
  });
}
