import { AbortedError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import type { components } from '../generated/openapi.js';
import type { GenerationEvent } from '../types.js';
import { followStream } from './events.js';

export interface AccountEventsOptions {
  /**
   * Resume after this event: an event's `cursor` (from this iteration or an earlier one, even of
   * another process). Default: from now on (events committed before the call are not given).
   */
  lastEventId?: string;
  /** Stops the iteration (AbortedError). */
  signal?: AbortSignal;
  /** Told each time the stream is open (its answer has come). */
  onOpen?: () => void;
  /**
   * Told the cursor the iteration starts after, before the stream opens (`lastEventId`, or "now"
   * pinned): a caller that starts a new iteration after this one failed passes it on, so that
   * nothing committed meanwhile is lost even before the first event.
   */
  onStart?: (cursor: string) => void;
}

/**
 * An event of the account's stream, as GET /v1/events gives it: `event`, the object a generation's
 * stream gives (`event.data.id` is the generation's id), under `cursor`, the place to resume after
 * it. Also, not enumerable (not in its JSON): `raw`, the event's JSON text exactly as the API sent
 * it (the bytes a webhook delivery of it carries).
 */
export type AccountEvent = components['schemas']['AccountEvent'] & { readonly raw: string };

/**
 * GET /v1/events as Server-Sent Events: every event of every generation of the account, as they are
 * committed. The stream has no end: the iteration goes on until it is aborted or broken out of.
 * "From now on" is pinned before the stream opens (the cursor of the account's newest event, one
 * JSON read), so a drop before the first event loses nothing either: every connection after that
 * resumes with Last-Event-ID, on any API process, nothing lost or given twice. Failures are
 * retried `maxRetries` times in a row (an open stream starts the count again).
 */
export async function* accountEvents(
  http: HttpCore,
  options: AccountEventsOptions = {},
): AsyncGenerator<AccountEvent, void, undefined> {
  const aborted = (cause: unknown) =>
    new AbortedError('Stopped reading the events of the account.', { cause });
  let start = options.lastEventId;
  if (start === undefined) {
    try {
      const page = await http.request<{ next_cursor: string }>({
        method: 'GET',
        path: '/events',
        query: { limit: 1 },
        signal: options.signal,
      });
      start = page.data.next_cursor;
    } catch (error) {
      if (error instanceof AbortedError) throw aborted(error);
      throw error;
    }
  }
  options.onStart?.(start);
  let cursor = start;
  yield* followStream<AccountEvent>(http, {
    path: '/events',
    lastEventId: start,
    signal: options.signal,
    onOpen: options.onOpen,
    openResetsFailures: true,
    take(message) {
      // As EventSource keeps it: a message without an id leaves the last one in force.
      cursor = message.id ?? cursor;
      const item = { cursor, event: JSON.parse(message.data) as GenerationEvent };
      Object.defineProperty(item, 'raw', { value: message.data, enumerable: false });
      return { item: item as AccountEvent, lastEventId: cursor, ended: false };
    },
    aborted,
  });
}
