import { zodToJsonSchema } from 'zod-to-json-schema';
import type { ZodType } from 'zod';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import { errorCodes, type ErrorCode } from '../errors.js';
import {
  creditBalanceSchema,
  errorBodySchema,
  generationListSchema,
  generationSchema,
  modelListSchema,
} from './schemas.js';

const toSchema = (schema: ZodType) => {
  const json = zodToJsonSchema(schema, { target: 'jsonSchema2019-09', $refStrategy: 'none' }) as Record<
    string,
    unknown
  >;
  delete json.$schema;
  return json;
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function errorResponses(...codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes)
    byStatus.set(errorCodes[code].status, [...(byStatus.get(errorCodes[code].status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      String(status),
      {
        description: list.map((c) => `\`${c}\`: ${errorCodes[c].description}`).join(' '),
        content: { 'application/json': { schema: ref('Error') } },
      },
    ]),
  );
}

const authErrors: ErrorCode[] = [
  'unauthorized',
  'payment_required',
  'api_access_disabled',
  'rate_limited',
  'internal_error',
  'service_unavailable',
];

/**
 * The OpenAPI 3.1 description of the v1 API, generated from the same zod
 * schemas that validate requests and shape responses; the request body of
 * POST /generations is the union of the live catalog's per-model schemas.
 */
export function buildOpenApiDocument(catalog: CatalogCache, serverUrl: string): Record<string, unknown> {
  const models = catalog.list();
  const requestSchemas = Object.fromEntries(
    models.map((m) => [
      `GenerationRequest_${m.entry.id.replace(/[^A-Za-z0-9]/g, '_')}`,
      m.publicView.request_schema,
    ]),
  );
  const xRequestId = {
    description: 'The generation id, or a request id elsewhere; quote it to support.',
    schema: { type: 'string' },
  };
  const json = (schema: unknown) => ({ 'application/json': { schema } });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Generation API',
      version: 'v1',
      description:
        'Asynchronous image and video generation. Create a generation (202), poll it every 2 to 3 seconds until its status is succeeded, failed or rejected, and download its output. Errors use one envelope; branch on error.code.',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
      },
      schemas: {
        Error: toSchema(errorBodySchema),
        Generation: toSchema(generationSchema),
        GenerationList: toSchema(generationListSchema),
        CreditBalance: toSchema(creditBalanceSchema),
        ModelList: toSchema(modelListSchema),
        ...requestSchemas,
      },
    },
    paths: {
      '/generations': {
        post: {
          summary: 'Create a generation',
          parameters: [
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              description: '1 to 128 printable ASCII characters without spaces; one per intended generation.',
              schema: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[\\x21-\\x7E]+$' },
            },
          ],
          requestBody: {
            required: true,
            content: json({
              oneOf: Object.keys(requestSchemas).map(ref),
              discriminator: { propertyName: 'model' },
            }),
          },
          responses: {
            '202': {
              description: 'Accepted (or a replay).',
              headers: { 'x-request-id': xRequestId },
              content: json(ref('Generation')),
            },
            ...errorResponses(
              'invalid_request',
              'insufficient_credits',
              'idempotency_conflict',
              'payload_too_large',
              'unsupported_media_type',
              'concurrency_limit_exceeded',
              ...authErrors,
            ),
          },
        },
        get: {
          summary: 'List generations, newest first',
          parameters: [
            {
              name: 'limit',
              in: 'query',
              schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
            },
            {
              name: 'cursor',
              in: 'query',
              schema: { type: 'string' },
              description: 'next_cursor of the previous page.',
            },
            {
              name: 'status',
              in: 'query',
              schema: { type: 'string' },
              description: 'Comma-separated subset of queued, succeeded, failed, rejected.',
            },
            { name: 'model', in: 'query', schema: { type: 'string' } },
          ],
          responses: {
            '200': { description: 'A page.', content: json(ref('GenerationList')) },
            ...errorResponses('invalid_request', ...authErrors),
          },
        },
      },
      '/generations/{id}': {
        get: {
          summary: 'Get a generation',
          parameters: [
            { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^gen_' } },
          ],
          responses: {
            '200': {
              description: 'The generation.',
              headers: { 'x-request-id': xRequestId },
              content: json(ref('Generation')),
            },
            ...errorResponses('not_found', ...authErrors),
          },
        },
      },
      '/credits': {
        get: {
          summary: 'Credit balance',
          responses: {
            '200': { description: 'The balance.', content: json(ref('CreditBalance')) },
            ...errorResponses(...authErrors),
          },
        },
      },
      '/models': {
        get: {
          summary: 'Model catalog with options and prices',
          responses: {
            '200': { description: 'The catalog.', content: json(ref('ModelList')) },
            ...errorResponses(...authErrors),
          },
        },
      },
      '/openapi.json': {
        get: {
          summary: 'This document',
          security: [],
          responses: { '200': { description: 'OpenAPI 3.1.', content: json({ type: 'object' }) } },
        },
      },
    },
  };
}
