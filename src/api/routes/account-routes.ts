import type { FastifyInstance } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { getBalance } from '../../db/credits-repository.js';
import { principalOf } from '../auth-plugin.js';
import { buildOpenApiDocument } from '../openapi.js';

/** GET /v1/credits: the balance; works at zero. */
export function creditsRoutes(app: FastifyInstance, deps: { db: CommonQueryMethods }): void {
  app.get('/v1/credits', async (request) => getBalance(deps.db, principalOf(request).accountId));
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
