import { isBatchEvent, type AccountEventRow } from '../db/account-events.js';
import { toBatchEventView } from './batch-event-streams.js';
import { EventStreamHub, type EventStreamHubOptions } from './event-stream-hub.js';
import { toGenerationEvent } from './generation-event-view.js';

/**
 * An account log's event as clients read it: a generation's as GET /v1/generations/{id}/events
 * gives it, a batch's with the Batch as `data` (its account_id, the log's own, left out).
 */
export function toAccountEvent(event: AccountEventRow['event']) {
  if (!isBatchEvent(event)) return toGenerationEvent(event);
  return toBatchEventView(event);
}

/**
 * One Server-Sent Events message of the account stream: the same event object as the generation's
 * own stream sends, under the account log's position (what Last-Event-ID names on GET /v1/events).
 */
export function accountSseMessage(row: AccountEventRow): string {
  return `id: ${row.position}\nevent: ${row.event.type}\ndata: ${JSON.stringify(toAccountEvent(row.event))}\n\n`;
}

/**
 * The open `GET /v1/events` streams of this process, by account, woken by the `account_event`
 * notification (the trigger that appends to the account log sends it, naming the account). They
 * never end by themselves: only at shutdown, when their key may no longer call, or when the client
 * goes away.
 */
export class AccountEventStreams extends EventStreamHub<AccountEventRow> {
  constructor(options: Omit<EventStreamHubOptions<AccountEventRow>, 'positionOf' | 'message' | 'finished'>) {
    super({ ...options, positionOf: (row) => row.position, message: accountSseMessage });
  }
}
