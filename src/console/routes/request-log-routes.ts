import type { FastifyInstance } from 'fastify';
import { requestLogPage } from '../../db/console-reads.js';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

const PAGE = 50;

/** The account's API request log, newest first, paged by position. */
export function requestLogRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.get<{ Querystring: { before?: string } }>('/requests', async (request, reply) => {
    const before = /^\d{1,15}$/.test(String(request.query.before ?? ''))
      ? Number(request.query.before)
      : null;
    const rows = await requestLogPage(deps.db, userOf(request).accountId, PAGE + 1, before);
    const page = rows.slice(0, PAGE);
    return sendPage(request, reply, 'requests', {
      title: 'Request log',
      rows: page,
      nextHref: rows.length > PAGE ? `/requests?before=${page.at(-1)!.id}` : null,
      format,
    });
  });
}
