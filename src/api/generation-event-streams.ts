import type { GenerationEventRow } from '../db/generation-events.js';
import { isTerminal } from './conditional-reads.js';
import { EventStreamHub, type EventStreamHubOptions } from './event-stream-hub.js';
import { sseMessage } from './generation-event-view.js';

export type { StreamSink } from './event-stream-hub.js';

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
      finished: (events, after) => {
        const newest = events.at(-1);
        return newest !== undefined && after >= newest.seq && isTerminal(newest.generation.status);
      },
    });
  }
}
