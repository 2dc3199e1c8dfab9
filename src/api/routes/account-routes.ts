import type { FastifyInstance } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { getBalance, type CreditBalance } from '../../db/credits-repository.js';
import type { InvalidatedCache } from '../../invalidated-cache.js';
import { principalOf } from '../auth-plugin.js';
import { buildOpenApiDocument } from '../openapi.js';

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

/** GET /v1/models: the live catalog, everything a client needs to build a request and know its price. */
export function modelsRoutes(app: FastifyInstance, deps: { catalog: CatalogCache }): void {
  app.get('/v1/models', () => ({ data: deps.catalog.list().map((m) => m.publicView) }));
}

/** GET /v1/openapi.json: no authentication; rebuilt when the catalog changes. */
export function openApiRoutes(
  app: FastifyInstance,
  deps: { catalog: CatalogCache; publicUrl: string },
): void {
  let cached: { version: number; body: string } | null = null;
  app.get('/v1/openapi.json', { config: { public: true } }, async (_request, reply) => {
    if (!cached || cached.version !== deps.catalog.version) {
      cached = {
        version: deps.catalog.version,
        body: JSON.stringify(buildOpenApiDocument(deps.catalog, deps.publicUrl)),
      };
    }
    return reply.type('application/json; charset=utf-8').send(cached.body);
  });
}
