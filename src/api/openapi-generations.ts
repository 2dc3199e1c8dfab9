import type { CatalogCache } from '../catalog/catalog-cache.js';
import { errorCodes } from '../errors.js';
import { errorResponses, everyOperation, ref, refTo } from './openapi-components.js';
import * as events from './openapi-events.js';
import * as described from './openapi-headers.js';
import { pathParameters, queryParameters } from './openapi-parameters.js';
import { routeSchemas } from './route-schemas.js';

/*
 * The generation operations of the OpenAPI document: their request bodies (one schema per model of
 * the live catalog) and their paths, a generation's events and the account's among them, in the
 * order the document lists them.
 */

const json = (schema: unknown) => ({ 'application/json': { schema } });

/**
 * The request body of POST /generations as components, one per model, each named
 * `GenerationRequest_<model id>`: the model's request schema with the envelope's `webhook` beside
 * its own fields.
 */
export function generationRequestSchemas(catalog: CatalogCache): Record<string, unknown> {
  return Object.fromEntries(
    catalog
      .list()
      .map((m) => [
        `GenerationRequest_${m.entry.id.replace(/[^A-Za-z0-9]/g, '_')}`,
        withWebhookField(m.publicView.request_schema),
      ]),
  );
}

/** A model's request schema with the envelope's `webhook` field beside its own (a copy: the catalog's stays as it is). */
function withWebhookField(schema: unknown): unknown {
  const { properties } = schema as { properties?: Record<string, unknown> };
  return { ...(schema as object), properties: { ...properties, webhook: ref('WebhookSubscription') } };
}

/**
 * The paths of a generation (create, list, quote, get, its events, cancel) and of the account's
 * events, given the names of the request bodies' components (generationRequestSchemas).
 */
export function generationPaths(requestSchemaNames: string[]) {
  const generationRequest = {
    required: true,
    content: json({
      oneOf: requestSchemaNames.map(ref),
      discriminator: { propertyName: 'model' },
    }),
  };
  return {
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
  };
}
