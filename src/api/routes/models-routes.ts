import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/** GET /v1/models: the live catalog, everything a client needs to build a request and know its price. */
export function modelsRoutes(app: ZodApp, deps: { catalog: CatalogCache }): void {
  app.get('/v1/models', { schema: routeSchemas.listModels }, () => ({
    data: deps.catalog.list().map((m) => m.publicView),
  }));
}
