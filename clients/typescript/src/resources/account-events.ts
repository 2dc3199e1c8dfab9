import { AbortedError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import type { GenerationEvent } from '../types.js';
import { followStream } from './events.js';

export interface AccountEventsOptions {
  /**
   * Resume after this event: an event's `cursor` (from this iteration or an earlier one, even of
   * another process). Default: from now on (events committed before the stream opened are not given).
   */
  lastEventId?: string;
  /** Stops the iteration (AbortedError). */
  signal?: AbortSignal;
  /** Told each time the stream is open: every event committed from then on will be given. */
  onOpen?: () => void;
}

/**
 * An event of the account's stream: the same object as a generation's stream gives (`data` is the
 * generation, `data.id` its id), plus, not enumerable (not in its JSON): `cursor`, to resume after
 * it, and `raw`, its JSON text exactly as the API sent it (the bytes a webhook delivery's body is).
 */
export type AccountEvent = GenerationEvent & { readonly cursor: string; readonly raw: string };

/**
 * GET /v1/events as Server-Sent Events: every event of every generation of the account, as they are
 * committed. The stream has no end: the iteration goes on until it is aborted or broken out of. A
 * dropped connection or an API restart is resumed with Last-Event-ID (the cursor): nothing lost or
 * given twice. Failures are retried `maxRetries` times in a row (an open stream starts the count again).
 */
export function accountEvents(
  http: HttpCore,
  options: AccountEventsOptions = {},
): AsyncGenerator<AccountEvent, void, undefined> {
  // As EventSource keeps it: a message without an id leaves the last one in force.
  let cursor = options.lastEventId ?? '';
  return followStream<AccountEvent>(http, {
    path: '/events',
    lastEventId: options.lastEventId,
    signal: options.signal,
    onOpen: options.onOpen,
    openResetsFailures: true,
    take(message) {
      const event = JSON.parse(message.data) as GenerationEvent;
      cursor = message.id ?? cursor;
      Object.defineProperties(event, {
        cursor: { value: cursor, enumerable: false },
        raw: { value: message.data, enumerable: false },
      });
      return { item: event as AccountEvent, lastEventId: cursor || undefined, ended: false };
    },
    aborted: (cause) => new AbortedError('Stopped reading the events of the account.', { cause }),
  });
}
