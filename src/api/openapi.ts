import type { CatalogCache } from '../catalog/catalog-cache.js';
import { componentSchemas, errorResponses, everyOperation, refTo } from './openapi-components.js';
import * as events from './openapi-events.js';
import { batchPaths, batchRequestLineSchema, batchWebhookEntries } from './openapi-batches.js';
import { generationPaths, generationRequestSchemas } from './openapi-generations.js';
import { addReadOnlyRefusals, keyPath } from './openapi-keys.js';
import { routeSchemas } from './route-schemas.js';

/*
 * The OpenAPI document, assembled: its head, its components, and its paths by concern (the
 * generations' in openapi-generations.ts, the batches' in openapi-batches.ts, the events' and the
 * webhook secret's in openapi-events.ts, the key's in openapi-keys.ts, the account's reads here).
 */

const json = (schema: unknown) => ({ 'application/json': { schema } });

/**
 * The OpenAPI 3.1 description of the v1 API, generated from the same zod
 * schemas that validate requests and shape responses; the request body of
 * POST /generations is the union of the live catalog's per-model schemas.
 */
export function buildOpenApiDocument(catalog: CatalogCache, serverUrl: string): Record<string, unknown> {
  const requestSchemas = generationRequestSchemas(catalog);
  const document = {
    openapi: '3.1.0',
    info: {
      title: 'Generation API',
      version: 'v1',
      description:
        'Asynchronous image and video generation. Create a generation (202), poll it every 2 to 3 seconds until its status is succeeded, failed or rejected, and download its output. Errors use one envelope; branch on error.code.',
    },
    servers: [{ url: serverUrl }],
    webhooks: { ...events.webhookEntries(), ...batchWebhookEntries() },
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
      },
      schemas: { ...componentSchemas(), ...requestSchemas, BatchRequestLine: batchRequestLineSchema },
    },
    paths: {
      ...generationPaths(Object.keys(requestSchemas)),
      ...events.webhookSecretPaths(errorResponses(...everyOperation)),
      ...batchPaths(),
      ...accountPaths(),
    },
  };
  addReadOnlyRefusals(document.paths, errorResponses('key_read_only')['403'] as { description: string });
  return document;
}

/** The account's reads (its credits, the key in use, the catalog) and this document's own path. */
function accountPaths() {
  return {
    '/credits': {
      get: {
        summary: 'Credit balance',
        responses: {
          '200': {
            description: 'The balance.',
            content: json(refTo(routeSchemas.getCredits.response[200])),
          },
          ...errorResponses(...everyOperation),
        },
      },
    },
    '/key': keyPath(json(refTo(routeSchemas.getKey.response[200])), errorResponses(...everyOperation)),
    '/models': {
      get: {
        summary: 'Model catalog with options and prices',
        responses: {
          '200': {
            description: 'The catalog.',
            content: json(refTo(routeSchemas.listModels.response[200])),
          },
          ...errorResponses(...everyOperation),
        },
      },
    },
    '/openapi.json': {
      get: {
        summary: 'This document',
        security: [],
        responses: {
          '200': { description: 'OpenAPI 3.1.', content: json({ type: 'object' }) },
          ...errorResponses('invalid_request', 'internal_error', 'service_unavailable'),
        },
      },
    },
  };
}
