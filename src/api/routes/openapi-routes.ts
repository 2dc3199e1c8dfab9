import type { FastifyInstance } from 'fastify';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { buildOpenApiDocument } from '../openapi.js';

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
