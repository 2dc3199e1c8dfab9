import type { ZodType } from 'zod';
import { toJsonSchema } from '../json-schema.js';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import { errorCodes, type ErrorCode } from '../errors.js';
import * as described from './openapi-headers.js';
import * as events from './openapi-events.js';
import { batchPaths, batchRequestLineSchema, batchWebhookEntries } from './openapi-batches.js';
import * as batches from './batch-schemas.js';
import { pathParameters, queryParameters } from './openapi-parameters.js';
import { apiKeySchema, keyEventSchema } from './key-schemas.js';
import { addReadOnlyRefusals, keyPath } from './openapi-keys.js';
import { routeSchemas } from './route-schemas.js';
import {
  accountEventListSchema,
  accountEventSchema,
  creditBalanceSchema,
  errorBodySchema,
  generationEventListSchema,
  generationEventSchema,
  generationListSchema,
  generationSchema,
  modelListSchema,
  notCancelableBodySchema,
  quoteSchema,
  validationErrorBodySchema,
  webhookSecretSchema,
  webhookSubscriptionSchema,
} from './schemas.js';

const toSchema = (schema: ZodType) => toJsonSchema(schema, 'input');

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** The response bodies the document names as components, each under its name. */
const components = new Map<ZodType, string>([
  [errorBodySchema, 'Error'],
  [validationErrorBodySchema, 'ValidationError'],
  [generationSchema, 'Generation'],
  [generationListSchema, 'GenerationList'],
  [creditBalanceSchema, 'CreditBalance'],
  [modelListSchema, 'ModelList'],
  [quoteSchema, 'Quote'],
  [notCancelableBodySchema, 'NotCancelable'],
  [generationEventSchema, 'GenerationEvent'],
  [generationEventListSchema, 'GenerationEventList'],
  [accountEventSchema, 'AccountEvent'],
  [accountEventListSchema, 'AccountEventList'],
  [webhookSecretSchema, 'WebhookSecret'],
  [apiKeySchema, 'ApiKey'],
  [keyEventSchema, 'KeyEvent'],
  [webhookSubscriptionSchema, 'WebhookSubscription'],
  [batches.batchSchema, 'Batch'],
  [batches.batchListSchema, 'BatchList'],
  [batches.batchQuoteSchema, 'BatchQuote'],
  [batches.batchEventSchema, 'BatchEvent'],
  [batches.batchEventListSchema, 'BatchEventList'],
  [batches.batchWebhookSubscriptionSchema, 'BatchWebhookSubscription'],
]);

/** A reference to the component of a route's response schema. */
function refTo(schema: ZodType) {
  const name = components.get(schema);
  if (!name) throw new Error('a route answers with a schema that is not a component of the document');
  return ref(name);
}

/** One response per status the codes answer with; a 400 always has its issues. */
function errorResponses(...codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes)
    byStatus.set(errorCodes[code].status, [...(byStatus.get(errorCodes[code].status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      String(status),
      {
        description: list.map((c) => `\`${c}\`: ${errorCodes[c].description}`).join(' '),
        headers: { 'x-request-id': described.requestIdHeader },
        content: { 'application/json': { schema: ref(status === 400 ? 'ValidationError' : 'Error') } },
      },
    ]),
  );
}

/**
 * What any operation that needs a key can answer besides its own: 400 (any query or path
 * parameter holding text that cannot be stored, a path that is not valid percent-encoding), the
 * authentication answers, and the failures every request can meet.
 */
const everyOperation: ErrorCode[] = [
  'invalid_request',
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
      withWebhookField(m.publicView.request_schema),
    ]),
  );
  const json = (schema: unknown) => ({ 'application/json': { schema } });
  const generationRequest = {
    required: true,
    content: json({
      oneOf: Object.keys(requestSchemas).map(ref),
      discriminator: { propertyName: 'model' },
    }),
  };
  const document = {
    openapi: '3.1.0',
    info: {
      title: 'Generation API',
      version: 'v1',
      description:
        'Asynchronous image and video generation. Create a generation (202), poll it every 2 to 3 seconds until its status is succeeded, failed or rejected, and download its output. Errors use one envelope; branch on error.code.',
    },
    servers: [{ url: serverUrl }],
    webhooks: { ...events.webhookEntries(), ...batchWebhookEntries(ref) },
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
      },
      schemas: {
        ...Object.fromEntries([...components].map(([schema, name]) => [name, toSchema(schema)])),
        ...requestSchemas,
        BatchRequestLine: batchRequestLineSchema,
      },
    },
    paths: {
      '/generations': {
        post: {
          summary: 'Create a generation',
          parameters: [
            described.preferWaitParameter,
            described.idempotencyKeyParameter,
            described.cancelAfterParameter,
          ],
          requestBody: generationRequest,
          responses: {
            '202': {
              description: 'Accepted (or a replay).',
              headers: described.generationHeaders,
              content: json(refTo(routeSchemas.createGeneration.response[202])),
            },
            ...errorResponses(
              'invalid_request',
              'insufficient_credits',
              'key_spend_limit_exceeded',
              'key_model_not_allowed',
              'idempotency_conflict',
              'payload_too_large',
              'unsupported_media_type',
              'concurrency_limit_exceeded',
              ...everyOperation,
            ),
          },
        },
        get: {
          summary: 'List generations, newest first',
          parameters: queryParameters(routeSchemas.listGenerations.querystring),
          responses: {
            '200': {
              description: 'A page.',
              content: json(refTo(routeSchemas.listGenerations.response[200])),
            },
            ...errorResponses(...everyOperation),
          },
        },
      },
      '/generations/quote': {
        post: {
          summary: 'Quote a generation: its price now and whether the balance covers it',
          description:
            'The same body as a create, validated exactly as a create (the same 400 with issues). Nothing is charged, started, stored or fetched. Counts against the rate limit like any request.',
          requestBody: generationRequest,
          responses: {
            '200': {
              description: 'The quote.',
              content: json(refTo(routeSchemas.quoteGeneration.response[200])),
            },
            ...errorResponses(
              'key_model_not_allowed',
              'payload_too_large',
              'unsupported_media_type',
              ...everyOperation,
            ),
          },
        },
      },
      '/generations/{id}': {
        get: {
          summary: 'Get a generation',
          parameters: [
            ...pathParameters(routeSchemas.getGeneration.params),
            described.preferWaitParameter,
            described.ifNoneMatchParameter,
          ],
          responses: {
            '200': {
              description: 'The generation.',
              headers: described.getGenerationHeaders,
              content: json(refTo(routeSchemas.getGeneration.response[200])),
            },
            '304': {
              description:
                'Not Modified: If-None-Match names the current ETag. No body; counts against the rate limit like any request.',
              headers: described.getGenerationHeaders,
            },
            ...errorResponses('not_found', ...everyOperation),
          },
        },
      },
      '/generations/{id}/events': events.eventsPath(
        pathParameters(routeSchemas.listGenerationEvents.params),
        refTo(routeSchemas.listGenerationEvents.response[200]),
        errorResponses('not_found', 'stream_limit_exceeded', ...everyOperation),
      ),
      '/events': events.accountEventsPath(
        queryParameters(routeSchemas.listAccountEvents.querystring),
        refTo(routeSchemas.listAccountEvents.response[200]),
        errorResponses('stream_limit_exceeded', ...everyOperation),
      ),
      '/generations/{id}/cancel': {
        post: {
          summary: 'Cancel a generation the provider has not run',
          description: described.cancelDescription,
          parameters: pathParameters(routeSchemas.cancelGeneration.params),
          responses: {
            '200': {
              description: 'Canceled (now or before): failed, `canceled`, refunded.',
              headers: described.generationHeaders,
              content: json(refTo(routeSchemas.cancelGeneration.response[200])),
            },
            ...errorResponses('not_found', ...everyOperation),
            '409': {
              description: `\`not_cancelable\`: ${errorCodes.not_cancelable.description}`,
              headers: { 'x-request-id': described.requestIdHeader },
              content: json(ref('NotCancelable')),
            },
          },
        },
      },
      ...events.webhookSecretPaths(errorResponses(...everyOperation)),
      ...batchPaths(ref, errorResponses, everyOperation),
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
    },
  };
  addReadOnlyRefusals(document.paths, errorResponses('key_read_only')['403'] as { description: string });
  return document;
}

/** A model's request schema with the envelope's `webhook` field beside its own (a copy: the catalog's stays as it is). */
function withWebhookField(schema: unknown): unknown {
  const { properties } = schema as { properties?: Record<string, unknown> };
  return { ...(schema as object), properties: { ...properties, webhook: ref('WebhookSubscription') } };
}
