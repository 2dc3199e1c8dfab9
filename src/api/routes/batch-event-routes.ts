import type { CommonQueryMethods } from 'slonik';
import { batchEventsAfter } from '../../db/batch-events.js';
import { getBatch } from '../../db/batches.js';
import {
  batchEnded,
  batchSseMessage,
  toBatchEventView,
  type BatchEventStreams,
} from '../batch-event-streams.js';
import type { StreamSlots } from '../stream-slots.js';
import type { ZodApp } from '../zod-type-provider.js';
import { batchEventListSchema, batchPathSchema } from '../batch-schemas.js';
import { listOrStreamEvents } from './event-routes.js';

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
    // A block, not an expression: the handler's answer is the list, or the reply the stream is sent on.
    return listOrStreamEvents(request, reply, deps.streams.slots, request.params.id, {
      find: (accountId, id) => getBatch(deps.db, accountId, id),
      notFound: 'No batch with this id in this account.',
      read: (id, afterSeq, options) => batchEventsAfter(deps.db, id, afterSeq, options),
      view: toBatchEventView,
      message: batchSseMessage,
      ended: batchEnded,
      streams: deps.streams.batches,
    });
  });
}
