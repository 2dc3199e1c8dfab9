import { generationEventTypes } from '../db/generation-events.js';

/**
 * The event log's part of the OpenAPI document: GET /v1/generations/{id}/events (its JSON form,
 * its text/event-stream form) and the webhook payload (OpenAPI 3.1 `webhooks`: the same event).
 * Kept apart from openapi.ts, which merges it in.
 */

const eventRef = { $ref: '#/components/schemas/GenerationEvent' };

export const lastEventIdParameter = {
  name: 'Last-Event-ID',
  in: 'header',
  required: false,
  description:
    'Resume after this event: only later events are sent. EventSource sends it itself when it reconnects. An empty value is read as if the header were absent: from the first event. Anything but empty or a whole number of 1 to 9 digits is a 400 `invalid_request` with an issue on `Last-Event-ID`.',
  schema: { type: 'string', pattern: '^([0-9]{1,9})?$' },
};

const eventsOperationDescription = [
  'The generation’s event log: one event per change a customer can see (`generation.created`, `generation.processing` when the provider has the job, `generation.succeeded`, `generation.failed`, `generation.rejected`, `generation.refunded`, `generation.requeued`, `generation.updated`, `generation.content_expired`), each with an id unique within the generation and increasing, and the generation as it was then.',
  'With `Accept: text/event-stream`: Server-Sent Events, each `id: <event id>`, `event: <type>`, `data: <the event as JSON>`; first the events after Last-Event-ID, then each new one as it is committed; a `: keep-alive` comment every 15 s; the server ends the stream after an event that leaves the generation succeeded, failed or rejected, and answers 204 when it is terminal and Last-Event-ID names its last event (EventSource then stops reconnecting). A stream counts once against the rate limit. Streams (with those of GET /v1/events) are capped per API key, per account and per server (429 `stream_limit_exceeded`, refused before any work); revoking the key, or the account losing API access, ends them; at shutdown the server ends streams, and clients resume with Last-Event-ID.',
  'With any other Accept: the log so far as JSON (after Last-Event-ID when sent).',
].join('\n\n');

/** GET /v1/generations/{id}/events, given its path parameters, its JSON list's schema and its error answers. */
export function eventsPath(pathParameters: unknown[], listSchema: unknown, errors: Record<string, unknown>) {
  return {
    get: {
      summary: "A generation's events: Server-Sent Events, or the log as JSON",
      description: eventsOperationDescription,
      parameters: [...pathParameters, lastEventIdParameter],
      responses: {
        '200': eventsOkResponse(listSchema),
        '204': { description: 'Terminal, and Last-Event-ID names its last event: nothing more will come.' },
        ...errors,
      },
    },
  };
}

/** The 200 of the events operation: two media types, one schema each. */
function eventsOkResponse(listSchema: unknown) {
  return {
    description: 'The events (a JSON list, or a stream of Server-Sent Events).',
    headers: { 'x-request-id': { description: 'The generation id.', schema: { type: 'string' } } },
    content: {
      'application/json': { schema: listSchema },
      'text/event-stream': {
        schema: { type: 'string' },
        description:
          'Server-Sent Events: `id: 1\\nevent: generation.created\\ndata: {"id":1,"type":"generation.created",…}\\n\\n`; the data is a GenerationEvent.',
      },
    },
  };
}

const accountLastEventIdParameter = {
  name: 'Last-Event-ID',
  in: 'header',
  required: false,
  description:
    'Resume after this cursor (an SSE id this operation gave out): only later events are sent, none lost or repeated, on any server. EventSource sends it itself when it reconnects. Absent or empty: `after` if given; else a stream starts from now on. A cursor this account’s log has not reached is 400.',
  schema: { type: 'string', pattern: '^[0-9]{0,15}$' },
};

const accountEventsDescription = [
  'Every event of every generation of the account (the same event objects as GET /v1/generations/{id}/events: `id` is the event’s number within its generation, `data` the generation, `data.id` names it), in the order they were committed, each under a cursor: its place in the account’s log. A client resuming after a cursor gets exactly the events committed after it, on any server, after any restart.',
  'With `Accept: text/event-stream`: Server-Sent Events, first `retry: 1000`, then each event as `id: <cursor>`, `event: <type>`, `data: <the event as JSON>`; a `: keep-alive` comment every 15 s. Without Last-Event-ID or `after`, the stream starts with the events committed from now on. It never ends by itself: only at the server’s shutdown (resume with Last-Event-ID on another), when the API key is revoked or the account’s API access ends, or when the client closes it. It counts once against the rate limit, and takes a place beside the generation streams: capped per API key, per account and per server (429 `stream_limit_exceeded`, refused before any work).',
  'With any other Accept: a page of events as JSON, oldest first: after `after` (or Last-Event-ID), or the newest ones without a cursor; `next_cursor` is where the next page starts.',
].join('\n\n');

/** GET /v1/events, given its query parameters, its JSON page's schema and its error answers. */
export function accountEventsPath(
  queryParameters: unknown[],
  pageSchema: unknown,
  errors: Record<string, unknown>,
) {
  return {
    get: {
      summary:
        "The account's events, every generation's, in commit order: Server-Sent Events, or a page as JSON",
      description: accountEventsDescription,
      parameters: [...queryParameters, accountLastEventIdParameter],
      responses: {
        '200': {
          description: 'The events (a JSON page, or a stream of Server-Sent Events).',
          content: {
            'application/json': { schema: pageSchema },
            'text/event-stream': {
              schema: { type: 'string' },
              description:
                'Server-Sent Events: `id: 42\\nevent: generation.succeeded\\ndata: {"id":3,"type":"generation.succeeded",…}\\n\\n`; the data is a GenerationEvent, the id its cursor.',
            },
          },
        },
        ...errors,
      },
    },
  };
}

/** What an event type's webhook entry adds: when a subscription is sent it and when it is not. */
const webhookNotes: Partial<Record<(typeof generationEventTypes)[number], string>> = {
  'generation.rejected':
    ' Sent for a refusal at admission (402 insufficient_credits, 429 concurrency_limit_exceeded), never for a request refused by validation (400 with `issues`): that request is not subscribed.',
};

/** OpenAPI 3.1 `webhooks`: what a subscribed receiver is sent, one entry per event type. */
export function webhookEntries() {
  return Object.fromEntries(
    generationEventTypes.map((type) => [
      type,
      webhookEntry(
        `${type} (a generation's event, sent to its webhook URL)`,
        'The body is the event, as GET /v1/generations/{id}/events gives it',
        eventRef,
        webhookNotes[type] ?? '',
      ),
    ]),
  );
}

/**
 * One `webhooks` entry: an event of a subject (a generation, a batch) sent to its subscription,
 * signed and retried the same way whatever the subject. `body` names the event's schema.
 */
export function webhookEntry(summary: string, bodyIs: string, body: unknown, note = '') {
  return {
    post: {
      summary,
      description:
        `${bodyIs}, signed per Standard Webhooks 1.0: \`webhook-id\`, \`webhook-timestamp\` and \`webhook-signature\` (\`v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">\` with the account’s secret, GET /v1/webhooks/secret; two signatures, space-separated, for 24 h after a rotation). Verify it over the exact bytes received. Answer 2xx quickly; 410 Gone stops deliveries to that URL for every generation or batch of the account subscribed to it before the 410 (their pending retries and later events end as gone, unsent; a redelivery asked for is still sent); one created after it with that URL is delivered.` +
        note,
      parameters: [
        { name: 'webhook-id', in: 'header', required: true, schema: { type: 'string' } },
        { name: 'webhook-timestamp', in: 'header', required: true, schema: { type: 'string' } },
        { name: 'webhook-signature', in: 'header', required: true, schema: { type: 'string' } },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: body } } },
      responses: {
        '200': { description: 'Received (any 2xx).' },
        '410': {
          description:
            'Gone: no more deliveries to this URL for the account’s subscriptions to it until now.',
        },
      },
    },
  };
}

/** GET /v1/webhooks/secret and POST /v1/webhooks/secret/rotate; `errors` gives the shared error answers. */
export function webhookSecretPaths(errors: Record<string, unknown>) {
  const ok = (description: string) => ({
    description,
    headers: {
      'cache-control': { description: '`no-store`: the body holds a secret.', schema: { type: 'string' } },
    },
    content: { 'application/json': { schema: { $ref: '#/components/schemas/WebhookSecret' } } },
  });
  return {
    '/webhooks/secret': {
      get: {
        summary: 'The webhook signing secret (made on first read)',
        description:
          'The secret deliveries are signed with (Standard Webhooks 1.0). It is kept by the service in a form that can sign, unlike API keys (stored as hashes): it authenticates nothing here. Any API key of the account reads it.',
        responses: { '200': ok('The secret, and the previous one while it still signs.'), ...errors },
      },
    },
    '/webhooks/secret/rotate': {
      post: {
        summary: 'Replace the webhook signing secret',
        description:
          'Makes a new secret. For 24 hours the replaced one keeps signing too: each delivery carries both signatures, space-separated, so receivers can switch over. A second rotation within that time drops the older one.',
        responses: { '200': ok('The new secret, and the previous one.'), ...errors },
      },
    },
  };
}
