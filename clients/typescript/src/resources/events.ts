import { AbortedError, ApiError, GenerationClientError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import { backoffMs, isRetryableStatus } from '../core/retry-policy.js';
import { abortableSleep } from '../core/signals.js';
import { sseMessages, type SseMessage } from '../core/sse.js';
import { isBatchTerminal, isTerminal, type BatchEvent, type GenerationEvent } from '../types.js';

export interface EventsOptions {
  /** Start after this event (an event's `id`): only later ones are given. Default: from the first. */
  lastEventId?: number;
  /** Stops the iteration (AbortedError); the generation goes on. */
  signal?: AbortSignal;
}

/** What one kind of event stream decides; the loop that follows a stream is shared (followStream). */
export interface StreamPlan<T> {
  path: string;
  /** Sent as Last-Event-ID on the first connection (none: the stream's own start). */
  lastEventId: string | undefined;
  /** The item a message holds, the id to resume after it, and whether nothing can come after it. */
  take(message: SseMessage & { data: string }): { item: T; lastEventId: string; ended: boolean };
  aborted(cause: unknown): AbortedError;
  /** A stream that opened counts as a success: failures in a row start again from 0. */
  openResetsFailures?: boolean;
  /** Told each time a stream is open (its 2xx answer has come): no event is missed from then on. */
  onOpen?: (() => void) | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Follows a Server-Sent Events stream, item by item. A connection that drops, or a server that
 * shuts down, is reopened with Last-Event-ID (after the server's `retry` delay): no event is lost
 * or given twice. Refusals that retrying cannot fix (401, 404, …) are thrown; 429 and 5xx and
 * network failures are retried with the client's backoff, `maxRetries` times in a row.
 */
export async function* followStream<T>(
  http: HttpCore,
  plan: StreamPlan<T>,
): AsyncGenerator<T, void, undefined> {
  const { signal } = plan;
  let last = plan.lastEventId;
  let failures = 0;
  let reconnectMs = 1000;
  for (;;) {
    let ended = false;
    try {
      const response = await http.openStream(
        plan.path,
        { accept: 'text/event-stream', ...(last === undefined ? {} : { 'last-event-id': last }) },
        signal,
      );
      if (response.status === 204 || !response.body) return;
      if (plan.openResetsFailures) failures = 0;
      plan.onOpen?.();
      for await (const message of sseMessages(response.body)) {
        if (message.retry !== undefined) reconnectMs = message.retry;
        if (message.data === undefined) {
          // As EventSource: an id without data still moves the place to resume from.
          if (message.id !== undefined) last = message.id;
          continue;
        }
        // Messages that arrived together are not handed out after the caller has aborted.
        if (signal?.aborted) throw plan.aborted(signal.reason);
        const taken = plan.take(message as SseMessage & { data: string });
        last = taken.lastEventId;
        failures = 0;
        ended = taken.ended;
        yield taken.item;
      }
      // The server ends the stream after a terminal event; any other end is a drop: resume.
      if (ended) return;
    } catch (error) {
      if (error instanceof AbortedError || signal?.aborted) throw plan.aborted(error);
      if (error instanceof ApiError && !isRetryableStatus(error.status)) throw error;
      if (!(error instanceof GenerationClientError) && !(error instanceof TypeError)) throw error;
      if (++failures > http.settings.maxRetries) throw error;
      const wait = error instanceof ApiError && error.retryAfterMs !== undefined ? error.retryAfterMs : 0;
      reconnectMs = Math.max(wait, backoffMs(failures - 1));
    }
    try {
      await abortableSleep(reconnectMs, signal);
    } catch (error) {
      throw plan.aborted(error);
    }
  }
}

/**
 * GET /v1/generations/{id}/events as Server-Sent Events, event by event, until the generation is
 * terminal (the server then ends the stream, or answers 204 when every event was seen).
 */
export function generationEvents(
  http: HttpCore,
  id: string,
  options: EventsOptions = {},
): AsyncGenerator<GenerationEvent, void, undefined> {
  return followStream<GenerationEvent>(http, {
    path: `/generations/${encodeURIComponent(id)}/events`,
    lastEventId: options.lastEventId === undefined ? undefined : String(options.lastEventId),
    signal: options.signal,
    take(message) {
      const event = JSON.parse(message.data) as GenerationEvent;
      return { item: event, lastEventId: String(event.id), ended: isTerminal(event.data) };
    },
    aborted: (cause) =>
      new AbortedError(`Stopped reading the events of generation ${id}; it goes on.`, {
        generationId: id,
        cause,
      }),
  });
}

/**
 * GET /v1/batches/{id}/events as Server-Sent Events, event by event, until the batch has ended
 * (the server then ends the stream, or answers 204 when every event was seen).
 */
export function batchEvents(
  http: HttpCore,
  id: string,
  options: EventsOptions = {},
): AsyncGenerator<BatchEvent, void, undefined> {
  return followStream<BatchEvent>(http, {
    path: `/batches/${encodeURIComponent(id)}/events`,
    lastEventId: options.lastEventId === undefined ? undefined : String(options.lastEventId),
    signal: options.signal,
    take(message) {
      const event = JSON.parse(message.data) as BatchEvent;
      return { item: event, lastEventId: String(event.id), ended: isBatchTerminal(event.data) };
    },
    aborted: (cause) => new AbortedError(`Stopped reading the events of batch ${id}; it goes on.`, { cause }),
  });
}
