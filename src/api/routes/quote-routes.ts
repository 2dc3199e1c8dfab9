import type { CommonQueryMethods } from 'slonik';
import { getBalance, type CreditBalance } from '../../db/credits-repository.js';
import type { InvalidatedCache } from '../../invalidated-cache.js';
import { principalOf } from '../auth-plugin.js';
import { quoteGeneration, type AdmissionDeps } from '../../generations/admit-generation.js';
import { quoteAnswer } from '../../generations/key-rules.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/**
 * POST /v1/generations/quote: what a create with the same body would debit now, and whether the
 * balance covers it. Admission answers without starting (quoteGeneration): the body is validated
 * exactly as a create's (the same 400 with its issues; its `webhook` checked, not priced), and the
 * price is the one admission computes. Nothing is charged, started, stored or fetched: an invalid
 * quote is not recorded either, since it is no request for a generation.
 */
export function quoteRoutes(
  app: ZodApp,
  deps: {
    db: CommonQueryMethods;
    admission: AdmissionDeps;
    balances: InvalidatedCache<string, CreditBalance>;
  },
): void {
  app.post(
    '/v1/generations/quote',
    { schema: routeSchemas.quoteGeneration, config: { checksOwnBody: true } },
    async (request) => {
      const principal = principalOf(request);
      const { accountId } = principal;
      const quote = await quoteGeneration(deps.admission, request.body, principal);
      const balance =
        deps.balances.peek(accountId) ??
        (await deps.balances.get(accountId, (id) => getBalance(deps.db, id)));
      return quoteAnswer(deps.db, principal.keyId, quote, balance);
    },
  );
}
