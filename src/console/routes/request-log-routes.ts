import type { FastifyInstance } from 'fastify';
import { cursorAfter, parsePageCursor, requestLogPage } from '../../db/console-reads.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

const PAGE = 50;

/** The account's API request log, newest first, paged by the last line shown (see PageCursor). */
export function requestLogRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.get<{ Querystring: { before?: string } }>('/requests', async (request, reply) => {
    const before = parsePageCursor(request.query.before);
    const rows = await requestLogPage(deps.db, userOf(request).accountId, PAGE + 1, before);
    const page = rows.slice(0, PAGE);
    const last = page.at(-1);
    return sendPage(request, reply, 'requests', {
      title: 'Request log',
      rows: page,
      nextHref: rows.length > PAGE && last ? `/requests?before=${cursorAfter(last)}` : null,
      format,
    });
  });
}
