import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import {
  batchCounts,
  batchCountsOf,
  getBatch,
  listBatches,
  type BatchCounts,
  type BatchRow,
} from '../../db/batches.js';
import { cancelBatch } from '../../generations/batches/batch-cancel.js';
import { batchResultsFile } from '../../db/batch-view.js';
import { batchLineStatuses, batchLinesPage, type BatchLineStatus } from '../../db/console-batch-reads.js';
import type { CommonQueryMethods } from 'slonik';
import { format, sendPage } from '../render.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

const PAGE = 50;
const ended = new Set(['completed', 'canceled', 'expired']);

/** A batch with its counts, and the share of its lines that have ended (for the progress bar). */
async function withCounts(db: CommonQueryMethods, row: BatchRow) {
  return progressOf(row, await batchCounts(db, row));
}

function progressOf(row: BatchRow, counts: BatchCounts) {
  const done = counts.total - counts.pending - counts.queued;
  return { row, counts, done, percent: counts.total === 0 ? 100 : Math.floor((done / counts.total) * 100) };
}

/**
 * Batches: the account's list (each with its progress bar and counts), a batch's lines by status
 * (each linked to its generation), cancel (a form with the session's token), and the results file.
 */
export function batchRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.get<{ Querystring: { cursor?: string } }>('/batches', async (request, reply) => {
    const { accountId } = userOf(request);
    const cursor = parseCursor(request.query.cursor);
    const rows = await listBatches(deps.db, { accountId, limit: PAGE + 1, after: cursor });
    const counts = await batchCountsOf(deps.db, rows.slice(0, PAGE));
    const page = rows.slice(0, PAGE).map((row) => progressOf(row, counts.get(row.id)!));
    const last = rows.length > PAGE ? rows[PAGE - 1]! : null;
    return sendPage(request, reply, 'batches', {
      title: 'Batches',
      batches: page,
      nextHref: last
        ? `/batches?cursor=${Buffer.from(JSON.stringify([last.created_at, last.id])).toString('base64url')}`
        : null,
      format,
    });
  });

  app.get<{ Params: { id: string }; Querystring: { status?: string; after?: string } }>(
    '/batches/:id',
    async (request, reply) => {
      const { accountId } = userOf(request);
      const row = await getBatch(deps.db, accountId, request.params.id);
      if (!row) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
      const status = (batchLineStatuses as readonly string[]).includes(request.query.status ?? '')
        ? (request.query.status as BatchLineStatus)
        : null;
      const after = /^\d{1,9}$/.test(request.query.after ?? '') ? Number(request.query.after) : -1;
      const lines = await batchLinesPage(deps.db, row.id, { status, afterLine: after, limit: PAGE + 1 });
      const shown = lines.slice(0, PAGE);
      const keep = status ? `status=${status}&` : '';
      return sendPage(request, reply, 'batch', {
        title: row.id,
        batch: await withCounts(deps.db, row),
        lines: shown,
        statuses: batchLineStatuses,
        status: status ?? '',
        cancelable: !ended.has(row.status) && row.status !== 'canceling',
        nextHref: lines.length > PAGE ? `/batches/${row.id}?${keep}after=${shown.at(-1)!.line}` : null,
        format,
      });
    },
  );

  app.post<{ Params: { id: string } }>('/batches/:id/cancel', async (request, reply) => {
    const { accountId } = userOf(request);
    const row = await getBatch(deps.db, accountId, request.params.id);
    if (!row) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    // As POST /v1/batches/{id}/cancel: the batch's workflow ends the lines not started, uncharged.
    await cancelBatch({ db: deps.db, temporal: deps.temporal, taskQueue: deps.admission.taskQueue }, row);
    return reply.redirect(`/batches/${row.id}`, 303);
  });

  /** The results file as GET /v1/batches/{id}/results gives it: finished lines, read page by page. */
  app.get<{ Params: { id: string } }>('/batches/:id/results.jsonl', async (request, reply) => {
    const { accountId } = userOf(request);
    const row = await getBatch(deps.db, accountId, request.params.id);
    if (!row) return sendPage(request, reply, 'not-found', { title: 'Not found' }, 404);
    const lines = await batchResultsFile(deps.db, row.id, -1, (error) =>
      request.log.error({ err: error, batchId: row.id }, "a batch's results were cut short"),
    );
    reply.header('content-type', 'application/x-ndjson; charset=utf-8');
    reply.header('content-disposition', `attachment; filename="${row.id}-results.jsonl"`);
    return reply.send(Readable.from(lines));
  });
}

function parseCursor(cursor: string | undefined): { createdAt: string; id: string } | null {
  if (!cursor || !/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return null;
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof createdAt === 'string' && typeof id === 'string' && !Number.isNaN(Date.parse(createdAt)))
      return { createdAt, id };
  } catch {
    // a cursor we did not give: the first page
  }
  return null;
}
