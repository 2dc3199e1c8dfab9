import type { FastifyInstance } from 'fastify';
import type { CatalogCache } from '../../catalog/catalog-cache.js';

/** GET /v1/models: the live catalog, everything a client needs to build a request and know its price. */
export function modelsRoutes(app: FastifyInstance, deps: { catalog: CatalogCache }): void {
  app.get('/v1/models', () => ({ data: deps.catalog.list().map((m) => m.publicView) }));
}
