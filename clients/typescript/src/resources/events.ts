import { AbortedError, ApiError, GenerationClientError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import { backoffMs, isRetryableStatus } from '../core/retry-policy.js';
import { abortableSleep } from '../core/signals.js';
import { sseMessages } from '../core/sse.js';
import { isTerminal, type GenerationEvent } from '../types.js';

export interface EventsOptions {
  /** Start after this event (an event's `id`): only later ones are given. Default: from the first. */
  lastEventId?: number;
  /** Stops the iteration (AbortedError); the generation goes on. */
  signal?: AbortSignal;
}

/**
 * GET /v1/generations/{id}/events as Server-Sent Events, event by event, until the generation is
 * terminal (the server then ends the stream, or answers 204 when every event was seen). A
 * connection that drops, or a server that shuts down, is reopened with Last-Event-ID: no event is
 * lost or given twice. Refusals that retrying cannot fix (401, 404, …) are thrown; 429 and 5xx and
 * network failures are retried with the client's backoff, `maxRetries` times in a row.
 */
export async function* generationEvents(
  http: HttpCore,
  id: string,
  options: EventsOptions = {},
): AsyncGenerator<GenerationEvent, void, undefined> {
  let last = options.lastEventId;
  let failures = 0;
  let reconnectMs = 1000;
  const path = `/generations/${encodeURIComponent(id)}/events`;
  for (;;) {
    let ended = false;
    try {
      const response = await http.openStream(
        path,
        { accept: 'text/event-stream', ...(last === undefined ? {} : { 'last-event-id': String(last) }) },
        options.signal,
      );
      if (response.status === 204 || !response.body) return;
      for await (const message of sseMessages(response.body)) {
        if (message.retry !== undefined) reconnectMs = message.retry;
        if (message.data === undefined) continue;
        // Messages that arrived together are not handed out after the caller has aborted.
        if (options.signal?.aborted) throw abortedFor(id, options.signal.reason);
        const event = JSON.parse(message.data) as GenerationEvent;
        last = event.id;
        failures = 0;
        ended = isTerminal(event.data);
        yield event;
      }
      // The server ends the stream after a terminal event; any other end is a drop: resume.
      if (ended) return;
    } catch (error) {
      if (error instanceof AbortedError || options.signal?.aborted) throw abortedFor(id, error);
      if (error instanceof ApiError && !isRetryableStatus(error.status)) throw error;
      if (!(error instanceof GenerationClientError) && !(error instanceof TypeError)) throw error;
      if (++failures > http.settings.maxRetries) throw error;
      const wait = error instanceof ApiError && error.retryAfterMs !== undefined ? error.retryAfterMs : 0;
      reconnectMs = Math.max(wait, backoffMs(failures - 1));
    }
    try {
      await abortableSleep(reconnectMs, options.signal);
    } catch (error) {
      throw abortedFor(id, error);
    }
  }
}

const abortedFor = (id: string, cause: unknown) =>
  new AbortedError(`Stopped reading the events of generation ${id}; it goes on.`, {
    generationId: id,
    cause,
  });
