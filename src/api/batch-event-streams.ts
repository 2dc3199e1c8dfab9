import type { z } from 'zod';
import { isBatchEnd, toBatchEvent, type BatchEventRow } from '../db/batch-events.js';
import type { batchSchema } from './batch-resource.js';
import { EventStreamHub, type EventStreamHubOptions } from './event-stream-hub.js';

/** A batch's event as clients read it (toBatchEvent), typed as the API document describes it. */
export const toBatchEventView = (event: BatchEventRow) =>
  toBatchEvent(event) as ReturnType<typeof toBatchEvent> & { data: z.infer<typeof batchSchema> };

/** One Server-Sent Events message of a batch's own stream: its event under its number. */
export function batchSseMessage(event: BatchEventRow): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(toBatchEvent(event))}\n\n`;
}

/** Whether the newest of `events` (read with it) ends the batch: nothing follows it. */
export const batchEnded = (events: readonly BatchEventRow[]): boolean => {
  const newest = events.at(-1);
  return newest !== undefined && isBatchEnd(newest.type);
};

/**
 * The open `GET /v1/batches/{id}/events` streams of this process, by batch, woken by the
 * `batch_event` notification (migration 0029: it names the batch). `read` gives a batch's events
 * after an event number and its newest event in any case (batchEventsAfter with `withNewest`): a
 * stream ends once it has the newest event and that event ends the batch (completed, canceled,
 * expired).
 */
export class BatchEventStreams extends EventStreamHub<BatchEventRow> {
  constructor(options: Omit<EventStreamHubOptions<BatchEventRow>, 'positionOf' | 'message' | 'finished'>) {
    super({
      ...options,
      positionOf: (event) => event.seq,
      message: batchSseMessage,
      finished: (events, after) => batchEnded(events) && after >= events.at(-1)!.seq,
    });
  }
}
