import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import { generationEventsAfter } from '../../db/generation-events.js';
import { ApiError, ValidationError } from '../../errors.js';
import { principalOf } from '../auth-plugin.js';
import { readOwnGeneration, type GenerationCache } from '../cached-generation.js';
import { isTerminal } from '../conditional-reads.js';
import type { GenerationEventStreams } from '../generation-event-streams.js';
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
      const { principal, stream, connection, lastSeq } = openEventRead(request, reply, deps.streams.slots);
      const { id } = request.params;
      const row = id ? await readOwnGeneration(deps, principal.accountId, id) : null;
      if (!row) throw new ApiError('not_found', 'No generation with this id in this account.');
      reply.header('x-request-id', row.id);
      if (!stream) {
        const events = await generationEventsAfter(deps.db, row.id, lastSeq);
        return { data: events.map(toGenerationEvent) };
      }

      const events = await generationEventsAfter(deps.db, row.id, lastSeq, { withNewest: true });
      const newest = events.at(-1);
      return sendEndingEventStream(reply, connection, {
        unseen: events.filter((e) => e.seq > lastSeq).map(sseMessage),
        ended: newest !== undefined && isTerminal(newest.generation.status),
        open: (body) => deps.streams.generations.open(row.id, principal, lastSeq, body),
        refused: streamLimitExceeded,
      });
    },
  );
}

/**
 * What a generation's or a batch's events route reads first: the caller; whether it wants a stream
 * (refused past the stream caps before any work, so that a client opening streams in a loop costs
 * nothing); its connection, watched from now on; and the event number it resumes after
 * (Last-Event-ID, 0 without one; 400 when it is not a whole number).
 */
export function openEventRead(request: FastifyRequest, reply: FastifyReply, slots: StreamSlots) {
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
