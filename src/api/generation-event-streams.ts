import type { GenerationEventRow } from '../db/generation-events.js';
import { isTerminal } from './conditional-reads.js';
import { EventStreamHub, type EventStreamHubOptions } from './event-stream-hub.js';
import { sseMessage } from './generation-event-view.js';

export type { StreamSink } from './event-stream-hub.js';

/** Whether the newest of `events` (read with it) leaves the generation terminal: nothing follows it. */
export const generationEnded = (events: readonly GenerationEventRow[]): boolean => {
  const newest = events.at(-1);
  return newest !== undefined && isTerminal(newest.generation.status);
};

/**
 * The open `GET /v1/generations/{id}/events` streams of this process, by generation, woken by the
 * `generation_event` notification (it names the generation). `read` gives a generation's events
 * after an event number and its newest event in any case (generationEventsAfter with
 * `withNewest`): a stream ends once it has the newest event and that event leaves the generation
 * terminal.
 */
export class GenerationEventStreams extends EventStreamHub<GenerationEventRow> {
  constructor(
    options: Omit<EventStreamHubOptions<GenerationEventRow>, 'positionOf' | 'message' | 'finished'>,
  ) {
    super({
      ...options,
      positionOf: (event) => event.seq,
      message: sseMessage,
      finished: (events, after) => generationEnded(events) && after >= events.at(-1)!.seq,
    });
  }
}
