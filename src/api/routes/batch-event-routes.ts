import type { CommonQueryMethods } from 'slonik';
import { batchEventsAfter } from '../../db/batch-events.js';
import { getBatch } from '../../db/batches.js';
import { ApiError } from '../../errors.js';
import {
  batchEnded,
  batchSseMessage,
  toBatchEventView,
  type BatchEventStreams,
} from '../batch-event-streams.js';
import { sendEndingEventStream } from '../sse-response.js';
import type { StreamSlots } from '../stream-slots.js';
import type { ZodApp } from '../zod-type-provider.js';
import { batchEventListSchema, batchPathSchema } from '../batch-schemas.js';
import { openEventRead, streamLimitExceeded } from './event-routes.js';

/** Its schemas (in batchRouteSchemas, which the OpenAPI document reads). */
export const batchEventsSchema = {
  params: batchPathSchema,
  response: { 200: batchEventListSchema },
} as const;

export interface BatchEventRouteDeps {
  db: CommonQueryMethods;
  streams: { slots: StreamSlots; batches: BatchEventStreams };
}

/**
 * GET /v1/batches/{id}/events: the batch's own events (batch.created, batch.progress at most once
 * a second, then batch.completed, canceled or expired), the same objects as in GET /v1/events and
 * in the batch's webhook deliveries, each under its number (its cursor). With
 * `Accept: text/event-stream`, a Server-Sent Events stream as a generation's: the events after
 * Last-Event-ID, each new one as it is committed, and the end after the batch's end event (204
 * when it has ended and the client has every event). Any other Accept: the events so far (after
 * Last-Event-ID) as JSON. Another account's batch is 404.
 */
export function batchEventRoutes(app: ZodApp, deps: BatchEventRouteDeps): void {
  app.get('/v1/batches/:id/events', { schema: batchEventsSchema }, async (request, reply) => {
    const { principal, stream, connection, lastSeq } = openEventRead(request, reply, deps.streams.slots);
    const { id } = request.params;
    const batch = id ? await getBatch(deps.db, principal.accountId, id) : null;
    if (!batch) throw new ApiError('not_found', 'No batch with this id in this account.');
    reply.header('x-request-id', batch.id);
    if (!stream) {
      const events = await batchEventsAfter(deps.db, batch.id, lastSeq);
      return { data: events.map(toBatchEventView) };
    }
    const events = await batchEventsAfter(deps.db, batch.id, lastSeq, { withNewest: true });
    return sendEndingEventStream(reply, connection, {
      unseen: events.filter((e) => e.seq > lastSeq).map(batchSseMessage),
      ended: batchEnded(events),
      open: (body) => deps.streams.batches.open(batch.id, principal, lastSeq, body),
      refused: streamLimitExceeded,
    });
  });
}
