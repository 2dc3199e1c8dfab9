import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import type { GenerationRow } from '../../db/generation-reads.js';
import { ApiError } from '../../errors.js';
import { admitGeneration, type AdmissionDeps } from '../../generations/admit-generation.js';
import { defaultPageSize, pageOfGenerations } from '../../generations/list-query.js';
import { principalOf } from '../auth-plugin.js';
import { readOwnGeneration, type GenerationCache } from '../cached-generation.js';
import { sendGeneration } from '../conditional-reads.js';
import type { GenerationWaiters } from '../generation-waiters.js';
import { toGeneration } from '../generation-view.js';
import { honourPreferWait } from '../prefer-wait.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

export interface GenerationRouteDeps {
  db: CommonQueryMethods;
  /** Admission (wireAdmission): the POST is its HTTP front door. */
  admission: AdmissionDeps;
  /** Generation records by id, dropped when PostgreSQL announces a change: polling costs no query. */
  cache: GenerationCache;
  /** Requests held by `Prefer: wait`, and the longest wait allowed in seconds (at most 60). */
  waiting?: { waiters: GenerationWaiters; maxSeconds: number };
}

/**
 * POST /v1/generations, GET /v1/generations/{id} and GET /v1/generations. POST goes through
 * admission's one path (admitGeneration, the console's playground's too) and only answers in HTTP:
 * 202, x-request-id, `Prefer: wait`. Reads come from the PostgreSQL projection only, never from Temporal.
 */
export function generationRoutes(app: ZodApp, deps: GenerationRouteDeps): void {
  // The body's text is checked by admitGeneration, so that the rejection is recorded like any other invalid request.
  app.post(
    '/v1/generations',
    { schema: routeSchemas.createGeneration, config: { checksOwnBody: true } },
    async (request, reply) => {
      const principal = principalOf(request);
      const admitted = await admitGeneration(
        deps.admission,
        {
          principal,
          idempotencyKey: request.headers['idempotency-key'],
          cancelAfter: request.headers['cancel-after'],
          body: request.body,
          recordInvalid: true,
        },
        request.log,
      );
      reply.header('x-request-id', admitted.generationId);
      // From here the generation may be charged: whatever fails, the answer is its 202, never an
      // error a client would retry (without an Idempotency-Key, paying again).
      const row = await readAfterStart(request, principal.accountId, admitted.generationId);
      const answer = row ? await waitIfPreferred(request, reply, row, principal) : admitted.known;
      return sendGeneration(reply, answer, { status: 202 });
    },
  );

  /**
   * The admitted generation as it stands, through the cache (the client's first polls of a new
   * generation are then answered from memory); null when it cannot be read, and the POST answers
   * with what the start knew, at once: there is nothing to wait on that could be read.
   */
  async function readAfterStart(
    request: FastifyRequest,
    accountId: string,
    generationId: string,
  ): Promise<GenerationRow | null> {
    const about = { generation_id: generationId, request_id: request.id };
    try {
      const row = await readOwnGeneration(deps, accountId, generationId);
      if (row) return row;
      request.log.error(about, 'an admitted generation has no projection row; answered as admitted');
    } catch (error) {
      request.log.warn(
        { ...about, err: error },
        'an admitted generation could not be read; answered as admitted',
      );
    }
    return null;
  }

  app.get('/v1/generations/:id', { schema: routeSchemas.getGeneration }, async (request, reply) => {
    // `/v1/generations/quote` is a path of its own (POST only): not a generation named "quote".
    if (request.url.split('?')[0] === '/v1/generations/quote') {
      reply.header('allow', 'POST');
      throw new ApiError('method_not_allowed', '/v1/generations/quote does not accept GET; it accepts POST.');
    }
    const { id } = request.params; // empty when it cannot name a generation
    const accountId = principalOf(request).accountId;
    const row = id ? await readOwnGeneration(deps, accountId, id) : null;
    if (!row) throw new ApiError('not_found', 'No generation with this id in this account.');
    reply.header('x-request-id', row.id);
    const answer = await waitIfPreferred(request, reply, row, principalOf(request));
    if (answer.provider !== null) reply.header('generation-provider', answer.provider);
    return sendGeneration(reply, answer, { status: 200, ifNoneMatch: request.headers['if-none-match'] });
  });

  /** The generation once `Prefer: wait` has been honoured (see honourPreferWait). */
  function waitIfPreferred(
    request: FastifyRequest,
    reply: FastifyReply,
    row: GenerationRow,
    principal: { accountId: string; keyId: string },
  ): Promise<GenerationRow> {
    if (!deps.waiting) return Promise.resolve(row);
    return honourPreferWait(request, reply, row, {
      ...deps.waiting,
      keyId: principal.keyId,
      reread: () => readOwnGeneration(deps, principal.accountId, row.id),
    });
  }

  app.get('/v1/generations', { schema: routeSchemas.listGenerations }, async (request) => {
    const { query } = request;
    const limit = query.limit ?? defaultPageSize;
    const principal = principalOf(request);
    const { rows, nextCursor } = await pageOfGenerations(deps.db, {
      accountId: principal.accountId,
      idempotencyKey:
        query.idempotency_key === undefined
          ? null
          : { apiKeyId: principal.keyId, key: query.idempotency_key },
      limit,
      statuses: query.status ?? null,
      model: query.model ?? null,
      after: query.cursor ?? null,
    });
    return { data: rows.map(toGeneration), next_cursor: nextCursor };
  });
}
