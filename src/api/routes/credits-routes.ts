import type { CommonQueryMethods } from 'slonik';
import { getBalance, type CreditBalance } from '../../db/credits-repository.js';
import type { InvalidatedCache } from '../../caches/invalidated-cache.js';
import { principalOf } from '../auth-plugin.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/** GET /v1/credits: the balance; works at zero. Served from a cache that every balance change invalidates. */
export function creditsRoutes(
  app: ZodApp,
  deps: { db: CommonQueryMethods; balances: InvalidatedCache<string, CreditBalance> },
): void {
  app.get('/v1/credits', { schema: routeSchemas.getCredits }, (request) => {
    const accountId = principalOf(request).accountId;
    return deps.balances.peek(accountId) ?? deps.balances.get(accountId, (id) => getBalance(deps.db, id));
  });
}
