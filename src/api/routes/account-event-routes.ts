import type { FastifyReply } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import { accountEventHead, accountEventsAfter, latestAccountEvents } from '../../db/account-events.js';
import { ValidationError } from '../../errors.js';
import { maxPageSize } from '../../generations/list-query.js';
import { toAccountEvent, type AccountEventStreams } from '../account-event-streams.js';
import { principalOf } from '../auth-plugin.js';
import { routeSchemas } from '../route-schemas.js';
import { accountCursorPattern } from '../schemas.js';
import { eventStreamBody, wantsEventStream, watchConnection } from '../sse-response.js';
import type { StreamSlots } from '../stream-slots.js';
import type { ZodApp } from '../zod-type-provider.js';
import { streamLimitExceeded } from './event-routes.js';

export interface AccountEventRouteDeps {
  db: CommonQueryMethods;
  streams: { slots: StreamSlots; accounts: AccountEventStreams };
}

/** A JSON page's size when `limit` is not given: the largest. */
const defaultPage = maxPageSize;

/**
 * The Last-Event-ID header as a cursor: absent or empty is undefined (none sent); anything but a
 * cursor's form is null (refused as invalid).
 */
function cursorOf(header: string | string[] | undefined): number | undefined | null {
  if (header === undefined) return undefined;
  const value = [header].flat().join(',').trim();
  if (value === '') return undefined;
  return accountCursorPattern.test(value) ? Number(value) : null;
}

const invalidCursor = (field: string, message: string) =>
  new ValidationError(
    [{ field, code: 'invalid_value', message }],
    `The ${field} ${field === 'after' ? 'parameter' : 'header'} is invalid.`,
  );

/**
 * GET /v1/events: every event of every generation of the account, in the order they committed,
 * each under its cursor (its position in the account's log, migration 0023). With
 * `Accept: text/event-stream`, a Server-Sent Events stream that never ends by itself: the events
 * after Last-Event-ID (or `after`), or from now on when neither is sent, then each new one as it is
 * committed. Any other Accept: a page of events as JSON. Streams take their places beside the
 * generations' streams (the same caps) and end when their key may no longer call.
 */
export function accountEventRoutes(app: ZodApp, deps: AccountEventRouteDeps): void {
  app.get('/v1/events', { schema: routeSchemas.listAccountEvents }, async (request, reply) => {
    const principal = principalOf(request);
    const stream = wantsEventStream(request.headers.accept);
    // Past the caps, refused before any work (no read): a client opening streams in a loop costs nothing.
    if (stream && !deps.streams.slots.hasRoomFor(principal)) throw streamLimitExceeded();
    const connection = watchConnection(reply);
    const lastEventId = cursorOf(request.headers['last-event-id']);
    if (lastEventId === null)
      throw invalidCursor('Last-Event-ID', 'Must be an event cursor: a whole number, as the stream gave it.');
    const field = lastEventId !== undefined ? 'Last-Event-ID' : 'after';
    const after = lastEventId ?? request.query.after;
    const head = await accountEventHead(deps.db, principal.accountId);
    // A cursor never given out (the log has not reached it): resuming there would skip what comes first.
    if (after !== undefined && after > head)
      throw invalidCursor(field, 'Names no event of this account: a cursor this API gave out is expected.');

    if (!stream) {
      const limit = request.query.limit ?? defaultPage;
      const rows =
        after === undefined
          ? await latestAccountEvents(deps.db, principal.accountId, limit)
          : await accountEventsAfter(deps.db, principal.accountId, after, limit + 1);
      const page = rows.slice(0, limit);
      return {
        data: page.map((row) => ({ cursor: String(row.position), event: toAccountEvent(row.event) })),
        next_cursor: String(page.at(-1)?.position ?? after ?? head),
        has_more: rows.length > limit,
      };
    }

    const body = eventStreamBody(reply);
    const detach = deps.streams.accounts.open(principal.accountId, principal, after ?? head, body);
    if (!detach) throw streamLimitExceeded();
    connection.whenGone(detach);
    // The schema describes the JSON answer; a stream is sent as it is, unserialized.
    return (reply as FastifyReply).send(body);
  });
}
