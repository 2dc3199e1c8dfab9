import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import { generationEventsAfter } from '../../db/generation-events.js';
import { ApiError, ValidationError } from '../../errors.js';
import { principalOf } from '../auth-plugin.js';
import { readOwnGeneration, type GenerationCache } from '../cached-generation.js';
import type { EventsAfterOptions } from '../../db/events-after.js';
import type { EventStreamHub } from '../event-stream-hub.js';
import { generationEnded, type GenerationEventStreams } from '../generation-event-streams.js';
import { sendEndingEventStream, wantsEventStream, watchConnection } from '../sse-response.js';
import { lastEventIdOf, sseMessage, toGenerationEvent } from '../generation-event-view.js';
import { routeSchemas } from '../route-schemas.js';
import type { StreamSlots } from '../stream-slots.js';
import type { ZodApp } from '../zod-type-provider.js';

export interface EventRouteDeps {
  db: CommonQueryMethods;
  /** The same generation cache GET /v1/generations/{id} reads through. */
  cache: GenerationCache;
  streams: { slots: StreamSlots; generations: GenerationEventStreams };
}

/**
 * GET /v1/generations/{id}/events. With `Accept: text/event-stream`, a Server-Sent Events stream:
 * the logged events after Last-Event-ID, then each new one as it is committed, a keep-alive comment
 * every EVENT_STREAM_KEEPALIVE_MS, and the end after an event that leaves the generation terminal
 * (204 when it is terminal and the client has every event already: EventSource stops reconnecting).
 * Any other Accept gets the log so far as JSON. One request, counted once against the rate limit,
 * however long the stream stays open.
 */
export function eventRoutes(app: ZodApp, deps: EventRouteDeps): void {
  app.get(
    '/v1/generations/:id/events',
    { schema: routeSchemas.listGenerationEvents },
    async (request, reply) => {
      return listOrStreamEvents(request, reply, deps.streams.slots, request.params.id, {
        find: (accountId, id) => readOwnGeneration(deps, accountId, id),
        notFound: 'No generation with this id in this account.',
        read: (id, afterSeq, options) => generationEventsAfter(deps.db, id, afterSeq, options),
        view: toGenerationEvent,
        message: sseMessage,
        ended: generationEnded,
        streams: deps.streams.generations,
      });
    },
  );
}

/** An event log that ends, as its route answers it: a generation's, a batch's. */
export interface EndingEventLog<Event extends { seq: number }, View> {
  /** The caller's subject of this id; null: none in the account (404 with `notFound`). */
  find(accountId: string, id: string): Promise<{ id: string } | null>;
  notFound: string;
  /** The subject's events after a number (generationEventsAfter, batchEventsAfter). */
  read(id: string, afterSeq: number, options?: EventsAfterOptions): Promise<Event[]>;
  /** An event in the JSON list. */
  view(event: Event): View;
  /** An event as a Server-Sent Events message. */
  message(event: Event): string;
  /** Whether the newest of `events` ends the log: nothing follows it. */
  ended(events: readonly Event[]): boolean;
  /** The process's open streams of this log. */
  streams: Pick<EventStreamHub<Event>, 'open'>;
}

/**
 * The answer of a subject's events route (GET /v1/generations/{id}/events, GET
 * /v1/batches/{id}/events): the caller's subject `id` (404 for another account's), named in
 * x-request-id; then, with `Accept: text/event-stream`, the stream of its events after
 * Last-Event-ID (sendEndingEventStream), and with any other Accept those events as a JSON list.
 */
export async function listOrStreamEvents<Event extends { seq: number }, View>(
  request: FastifyRequest,
  reply: FastifyReply,
  slots: StreamSlots,
  id: string,
  log: EndingEventLog<Event, View>,
): Promise<{ data: View[] } | FastifyReply> {
  const { principal, stream, connection, lastSeq } = openEventRead(request, reply, slots);
  const subject = id ? await log.find(principal.accountId, id) : null;
  if (!subject) throw new ApiError('not_found', log.notFound);
  reply.header('x-request-id', subject.id);
  if (!stream) return { data: (await log.read(subject.id, lastSeq)).map((event) => log.view(event)) };
  const events = await log.read(subject.id, lastSeq, { withNewest: true });
  return sendEndingEventStream(reply, connection, {
    unseen: events.filter((e) => e.seq > lastSeq).map((event) => log.message(event)),
    ended: log.ended(events),
    open: (body) => log.streams.open(subject.id, principal, lastSeq, body),
    refused: streamLimitExceeded,
  });
}

/**
 * What a generation's or a batch's events route reads first: the caller; whether it wants a stream
 * (refused past the stream caps before any work, so that a client opening streams in a loop costs
 * nothing); its connection, watched from now on; and the event number it resumes after
 * (Last-Event-ID, 0 without one; 400 when it is not a whole number).
 */
function openEventRead(request: FastifyRequest, reply: FastifyReply, slots: StreamSlots) {
  const principal = principalOf(request);
  const stream = wantsEventStream(request.headers.accept);
  if (stream && !slots.hasRoomFor(principal)) throw streamLimitExceeded();
  const connection = watchConnection(reply);
  const lastSeq = lastEventIdOf(request.headers['last-event-id']);
  if (lastSeq === null)
    throw new ValidationError(
      [{ field: 'Last-Event-ID', code: 'invalid_value', message: 'Must be an event id: a whole number.' }],
      'The Last-Event-ID header is invalid.',
    );
  return { principal, stream, connection, lastSeq };
}

/** 429: the key, its account or this server has as many streams open as it may. */
export function streamLimitExceeded(): ApiError {
  return new ApiError(
    'stream_limit_exceeded',
    'Too many event streams are open for this API key or account (or on this server); close one, or retry later.',
    { retryAfterSeconds: 5 },
  );
}
