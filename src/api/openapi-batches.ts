import { batchEventTypes } from '../db/batch-events.js';
import { toJsonSchema } from '../json-schema.js';
import { batchLineSchema } from './batch-schemas.js';
import { errorResponses, everyOperation, ref } from './openapi-components.js';
import { lastEventIdParameter, webhookEntry } from './openapi-events.js';
import { idempotencyKeyHeader } from './openapi-headers.js';
import { pathParameters, queryParameters } from './openapi-parameters.js';
import { batchRouteSchemas as routes } from './routes/batch-routes.js';

/** The batch operations of the OpenAPI document (POST /v1/batches and its reads, quote and cancel). */

/** Their paths. */
export function batchPaths() {
  const json = (schema: unknown) => ({ 'application/json': { schema } });
  const body = {
    required: true,
    description:
      'JSON: `{"requests": [lines], "completion_window", "metadata", "webhook"}`, its members in any order. JSONL (`application/x-ndjson`): one line per request; its completion_window, metadata and webhook in the query. Either is read as it arrives, up to BATCH_BODY_LIMIT_BYTES (not the API body limit). Each line is a generation request (the body of POST /v1/generations) with a `custom_id`, unique in the batch.',
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['requests'],
          additionalProperties: false,
          properties: {
            requests: { type: 'array', minItems: 1, items: ref('BatchRequestLine') },
            completion_window: {
              type: 'string',
              pattern: '^[1-9][0-9]{0,6}[smhd]$',
              description: 'Lines not started by then expire, uncharged (default 24h, at most 7d).',
            },
            metadata: { type: ['object', 'null'], additionalProperties: { type: 'string' } },
            webhook: ref('BatchWebhookSubscription'),
          },
        },
      },
      'application/x-ndjson': { schema: { type: 'string' } },
    },
  };
  const keyHeader = idempotencyKeyHeader(
    'As for a generation: the same key and lines answer the same batch (200); other lines, 409.',
  );
  return {
    '/batches': {
      post: {
        summary: 'Create a batch: many generations, each started (and charged) in turn',
        parameters: [keyHeader, ...queryParameters(routes.createBatch.querystring)],
        requestBody: body,
        responses: {
          '201': { description: 'Created.', content: json(ref('Batch')) },
          '200': {
            description: 'A retry with the same Idempotency-Key and lines.',
            content: json(ref('Batch')),
          },
          ...errorResponses(
            'invalid_request',
            'insufficient_credits',
            'idempotency_conflict',
            'payload_too_large',
            'unsupported_media_type',
            'open_batch_limit_exceeded',
            'batch_lines_limit_exceeded',
            ...everyOperation,
          ),
        },
      },
      get: {
        summary: 'List batches, newest first',
        parameters: queryParameters(routes.listBatches.querystring),
        responses: {
          '200': { description: 'A page.', content: json(ref('BatchList')) },
          ...errorResponses(...everyOperation),
        },
      },
    },
    '/batches/quote': {
      post: {
        summary: "Quote a batch: its lines checked as a create's, their total now",
        parameters: queryParameters(routes.quoteBatch.querystring),
        requestBody: body,
        responses: {
          '200': { description: 'The quote.', content: json(ref('BatchQuote')) },
          ...errorResponses('payload_too_large', 'unsupported_media_type', ...everyOperation),
        },
      },
    },
    '/batches/{id}': {
      get: {
        summary: 'Get a batch: its status, counts and credits spent',
        parameters: pathParameters(routes.getBatch.params),
        responses: {
          '200': { description: 'The batch.', content: json(ref('Batch')) },
          ...errorResponses('not_found', ...everyOperation),
        },
      },
    },
    '/batches/{id}/results': {
      get: {
        summary: 'The results file: one JSON line per finished line, in input order',
        parameters: [
          ...pathParameters(routes.batchResults.params),
          ...queryParameters(routes.batchResults.querystring),
        ],
        responses: {
          '200': {
            description:
              'JSONL (application/x-ndjson): each finished line (its generation ended, or it ended without one) with `line`, `custom_id`, its generation or null, and its error or null. Lines still running are left out: read again, with `after`, for more.',
            content: { 'application/x-ndjson': { schema: toJsonSchema(batchLineSchema, 'input') } },
          },
          ...errorResponses('not_found', ...everyOperation),
        },
      },
    },
    '/batches/{id}/events': {
      get: {
        summary: "A batch's own events: Server-Sent Events, or the log as JSON",
        description: batchEventsDescription,
        parameters: [...pathParameters(routes.batchEvents.params), lastEventIdParameter],
        responses: {
          '200': {
            description: 'The events (a JSON list, or a stream of Server-Sent Events).',
            headers: { 'x-request-id': { description: 'The batch id.', schema: { type: 'string' } } },
            content: {
              ...json(ref('BatchEventList')),
              'text/event-stream': {
                schema: { type: 'string' },
                description:
                  'Server-Sent Events: `id: 1\\nevent: batch.created\\ndata: {"id":1,"type":"batch.created",…}\\n\\n`; the data is a BatchEvent.',
              },
            },
          },
          '204': { description: 'Ended, and Last-Event-ID names its last event: nothing more will come.' },
          ...errorResponses('not_found', 'stream_limit_exceeded', ...everyOperation),
        },
      },
    },
    '/batches/{id}/cancel': {
      post: {
        summary:
          'Cancel a batch: lines not started end canceled (uncharged), running ones as a cancel of each',
        parameters: pathParameters(routes.cancelBatch.params),
        responses: {
          '200': { description: 'The batch, canceling (or as it ended).', content: json(ref('Batch')) },
          ...errorResponses('not_found', ...everyOperation),
        },
      },
    },
  };
}

const batchEventsDescription = [
  'The batch’s own events: `batch.created`, `batch.progress` (the counts changed; at most one a second), then one of `batch.completed`, `batch.canceled`, `batch.expired`, each with an id unique within the batch and increasing, and the batch as it was then. The same event objects are in GET /v1/events and are the bodies of the batch’s webhook deliveries. Its lines’ generations have their own events (GET /v1/generations/{id}/events).',
  'With `Accept: text/event-stream`: Server-Sent Events, each `id: <event id>`, `event: <type>`, `data: <the event as JSON>`; first the events after Last-Event-ID, then each new one as it is committed; a `: keep-alive` comment every 15 s; the server ends the stream after the batch’s end event, and answers 204 when the batch has ended and Last-Event-ID names its last event. Streams share the caps of the other event streams (429 `stream_limit_exceeded`).',
  'With any other Accept: the events so far as JSON (after Last-Event-ID when sent).',
].join('\n\n');

/** OpenAPI 3.1 `webhooks` entries of a batch's events (POST /v1/batches `webhook`). */
export function batchWebhookEntries() {
  return Object.fromEntries(
    batchEventTypes.map((type) => [
      type,
      webhookEntry(
        `${type} (a batch's event, sent to its webhook URL)`,
        'The body is the event, as GET /v1/batches/{id}/events gives it',
        ref('BatchEvent'),
      ),
    ]),
  );
}

/** A request line as the document shows it: a generation request (POST /v1/generations) and its `custom_id`. */
export const batchRequestLineSchema = {
  type: 'object',
  required: ['custom_id', 'model'],
  properties: {
    custom_id: {
      type: 'string',
      pattern: '^[\\x20-\\x7E]{1,64}$',
      description: 'Names the line in the results and on its generation; unique in the batch.',
    },
    model: {
      type: 'string',
      minLength: 1,
      description: 'A model id; the other fields are that model’s (see GenerationRequest_*).',
    },
  },
  additionalProperties: true,
};
