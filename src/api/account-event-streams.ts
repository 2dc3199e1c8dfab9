import type { z } from 'zod';
import { isBatchEvent, isKeyEvent, type AccountEventRow, type KeyEventRow } from '../db/account-events.js';
import type { keyEventSchema } from './key-schemas.js';
import { toBatchEventView } from './batch-event-streams.js';
import { EventStreamHub, type EventStreamHubOptions } from './event-stream-hub.js';
import { toGenerationEvent } from './generation-event-view.js';

/**
 * An account log's event as clients read it: a generation's as GET /v1/generations/{id}/events
 * gives it, a batch's with the Batch as `data` (its account_id, the log's own, left out), a key's
 * with its limit as `data`.
 */
export function toAccountEvent(event: AccountEventRow['event']) {
  if (isKeyEvent(event)) return toKeyEvent(event);
  if (!isBatchEvent(event)) return toGenerationEvent(event);
  return toBatchEventView(event);
}

/** A key's event as clients read it: its limit as it stood, the account_id (the log's own) left out. */
function toKeyEvent(event: KeyEventRow) {
  const { account_id: _account, ...data } = event.key;
  return { id: event.seq, type: event.type, created_at: event.created_at, data } as z.infer<
    typeof keyEventSchema
  >;
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
