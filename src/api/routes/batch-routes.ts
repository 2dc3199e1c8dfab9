import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { batchResultsFile, toBatch } from '../../db/batch-view.js';
import { quoteAnswer } from '../../generations/admission/key-rules.js';
import { batchCounts, batchCountsOf, getBatch, listBatches, type BatchRow } from '../../db/batches.js';
import type { DatabasePool } from '../../db/pool.js';
import { ApiError } from '../../vocabulary/errors.js';
import { cancelBatch } from '../../generations/batches/batch-cancel.js';
import { createBatch, quoteBatch, type BatchCreationDeps } from '../../generations/batches/batch-creation.js';
import { defaultPageSize } from '../../generations/list-query.js';
import { getBalance } from '../../db/credits-repository.js';
import { principalOf } from '../auth-plugin.js';
import { jsonBatchBody, jsonlBatchBody, type BatchBodyLimits } from '../batch-bodies.js';
import { BatchUploads } from '../batch-uploads.js';
import {
  batchListSchema,
  batchPathSchema,
  batchQuoteSchema,
  batchResultsQuerySchema,
  batchSchema,
  createBatchQuerySchema,
  encodeBatchCursor,
  listBatchesQuerySchema,
} from '../batch-schemas.js';
import type { ZodApp, ZodTypeProvider } from '../zod-type-provider.js';
import { batchEventRoutes, batchEventsSchema, type BatchEventRouteDeps } from './batch-event-routes.js';

export interface BatchRouteDeps extends Omit<BatchCreationDeps, 'pool'> {
  pool: DatabasePool;
  /** Largest batch body, JSON or JSONL, read as it arrives (BATCH_BODY_LIMIT_BYTES). */
  bodyLimitBytes: number;
  /** Largest line of one (BODY_LIMIT_BYTES: what a POST /v1/generations body may be). */
  lineLimitBytes: number;
  /** Batch uploads read at once per API key (BATCH_UPLOADS_PER_KEY). */
  uploadsPerKey: number;
  /** The process's event streams: GET /v1/batches/{id}/events (batch-event-routes.ts). */
  streams: BatchEventRouteDeps['streams'];
}

export const batchRouteSchemas = {
  createBatch: { querystring: createBatchQuerySchema, response: { 200: batchSchema, 201: batchSchema } },
  quoteBatch: { querystring: createBatchQuerySchema, response: { 200: batchQuoteSchema } },
  getBatch: { params: batchPathSchema, response: { 200: batchSchema } },
  cancelBatch: { params: batchPathSchema, response: { 200: batchSchema } },
  listBatches: { querystring: listBatchesQuerySchema, response: { 200: batchListSchema } },
  batchResults: { params: batchPathSchema, querystring: batchResultsQuerySchema },
  batchEvents: batchEventsSchema,
} as const;

/**
 * POST /v1/batches (JSON `{"requests": […]}`, or JSONL lines, `application/x-ndjson`; either read
 * as it arrives, up to BATCH_BODY_LIMIT_BYTES rather than the API's body limit), GET /v1/batches/{id},
 * GET /v1/batches, GET /v1/batches/{id}/results (JSONL, streamed page by page),
 * POST /v1/batches/{id}/cancel, and GET /v1/batches/{id}/events (batch-event-routes.ts). In a scope
 * of their own: their body parsers apply to them only.
 */
export function batchRoutes(root: FastifyInstance, deps: BatchRouteDeps): void {
  void root.register((scope, _options, done) => {
    // The body is handed over unread (the general body limit does not apply): the route reads it as it arrives.
    scope.removeContentTypeParser('application/json');
    for (const type of ['application/json', 'application/x-ndjson'])
      scope.addContentTypeParser(type, (_request, payload, parsed) => parsed(null, payload));
    routes(scope.withTypeProvider<ZodTypeProvider>(), deps);
    batchEventRoutes(scope.withTypeProvider<ZodTypeProvider>(), { db: deps.pool, streams: deps.streams });
    done();
  });
}

function routes(typed: ZodApp, deps: BatchRouteDeps) {
  const view = async (row: BatchRow) => toBatch(row, await batchCounts(deps.pool, row));
  const uploads = new BatchUploads(deps.uploadsPerKey);
  const limits = { bodyBytes: deps.bodyLimitBytes, lineBytes: deps.lineLimitBytes };

  /**
   * Reads a create's or a quote's body in one of its key's upload places (a 429 when it has none
   * left). Answered before the body has all arrived (a 413, a 429, a line refused), the connection
   * is closed after the answer: the rest of the body is never parsed, only dropped for a few seconds
   * so that the client sees the answer rather than a reset (net/lingering-close.ts).
   */
  async function upload<T>(request: FastifyRequest, reply: FastifyReply, work: () => Promise<T>): Promise<T> {
    let release: (() => void) | undefined;
    try {
      release = uploads.take(principalOf(request).keyId);
      return await work();
    } catch (error) {
      // The error handler (errors-plugin.ts) then closes it lingering.
      if (!request.raw.complete) reply.header('connection', 'close');
      throw error;
    } finally {
      release?.();
    }
  }

  typed.post(
    '/v1/batches',
    { schema: batchRouteSchemas.createBatch, config: { checksOwnBody: true } },
    async (request, reply) => {
      const principal = principalOf(request);
      const { batch, created } = await upload(request, reply, () =>
        createBatch(deps, {
          principal,
          idempotencyKey: request.headers['idempotency-key'],
          ...batchBody(request, limits),
        }),
      );
      reply.header('x-request-id', batch.id);
      return reply.status(created ? 201 : 200).send(await view(batch));
    },
  );

  typed.post(
    '/v1/batches/quote',
    { schema: batchRouteSchemas.quoteBatch, config: { checksOwnBody: true } },
    async (request, reply) => {
      const principal = principalOf(request);
      const quote = await upload(request, reply, () => quoteBatch(deps, batchBody(request, limits)));
      return quoteAnswer(deps.pool, principal.keyId, quote, await getBalance(deps.pool, principal.accountId));
    },
  );

  typed.get('/v1/batches/:id', { schema: batchRouteSchemas.getBatch }, async (request, reply) => {
    // `/v1/batches/quote` is a path of its own (POST only): not a batch named "quote".
    if (request.url.split('?')[0] === '/v1/batches/quote') {
      reply.header('allow', 'POST');
      throw new ApiError('method_not_allowed', '/v1/batches/quote does not accept GET; it accepts POST.');
    }
    return view(await ownBatch(request.params.id, principalOf(request).accountId));
  });

  typed.get('/v1/batches', { schema: batchRouteSchemas.listBatches }, async (request) => {
    const limit = request.query.limit ?? defaultPageSize;
    const rows = await listBatches(deps.pool, {
      accountId: principalOf(request).accountId,
      limit: limit + 1,
      after: request.query.cursor ?? null,
    });
    const page = rows.slice(0, limit);
    // The page's counts in one statement (a page of 100 once held every connection of the pool).
    const counts = await batchCountsOf(deps.pool, page);
    return {
      data: page.map((row) => toBatch(row, counts.get(row.id)!)),
      next_cursor: rows.length > limit && page.length > 0 ? encodeBatchCursor(page.at(-1)!) : null,
    };
  });

  typed.post('/v1/batches/:id/cancel', { schema: batchRouteSchemas.cancelBatch }, async (request) => {
    const batch = await ownBatch(request.params.id, principalOf(request).accountId);
    // The workflow sees it at its next look: lines not started end canceled, running ones are asked to stop.
    return view(await cancelBatch({ ...deps, db: deps.pool }, batch));
  });

  typed.get('/v1/batches/:id/results', { schema: batchRouteSchemas.batchResults }, async (request, reply) => {
    const batch = await ownBatch(request.params.id, principalOf(request).accountId);
    const lines = await batchResultsFile(deps.pool, batch.id, request.query.after ?? -1, (error) =>
      request.log.error({ err: error, batchId: batch.id }, "a batch's results were cut short"),
    );
    reply.header('content-type', 'application/x-ndjson; charset=utf-8');
    return reply.send(Readable.from(lines));
  });

  async function ownBatch(id: string, accountId: string): Promise<BatchRow> {
    const row = id ? await getBatch(deps.pool, accountId, id) : null;
    if (!row) throw new ApiError('not_found', 'No batch with this id in this account.');
    return row;
  }
}

/** The lines and envelope of a create or quote, read as the body arrives (JSONL: the envelope in the query). */
function batchBody(request: FastifyRequest, limits: BatchBodyLimits) {
  if (!(request.body instanceof Readable))
    throw new ApiError('invalid_request', 'The body needs `requests`: an array of request lines.', {
      issues: [{ field: 'requests', code: 'required', message: 'Expected an array of request lines.' }],
    });
  const jsonl = /^application\/x-ndjson\b/i.test(request.headers['content-type'] ?? '');
  return jsonl
    ? {
        ...jsonlBatchBody(request.body, limits, envelopeFromQuery(request.query)),
        lineField: (index: number) => `line ${index}`,
      }
    : { ...jsonBatchBody(request.body, limits), lineField: (index: number) => `requests[${index}]` };
}

function envelopeFromQuery(query: unknown): Record<string, unknown> {
  const { completion_window: window, ...json } = query as Record<string, string | undefined>;
  const envelope: Record<string, unknown> = window === undefined ? {} : { completion_window: window };
  // JSON text: what does not parse is handed on as it is, and refused by the envelope's check.
  for (const field of ['metadata', 'webhook'] as const) {
    const text = json[field];
    if (text === undefined) continue;
    try {
      envelope[field] = JSON.parse(text);
    } catch {
      envelope[field] = text;
    }
  }
  return envelope;
}
