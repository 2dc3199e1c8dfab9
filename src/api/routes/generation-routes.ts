import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import type { CatalogEntry } from '../../catalog/catalog-entry.js';
import { getGeneration, type GenerationRow } from '../../db/generation-reads.js';
import { recordRejectedRequest } from '../../db/admission-repository.js';
import type { InvalidatedCache } from '../../invalidated-cache.js';
import { ApiError, ValidationError, admissionRefusal, idempotencyConflict } from '../../errors.js';
import { newId } from '../../ids.js';
import type { ApiGenerationMetrics } from '../../observability/metrics.js';
import { toStorableText } from '../../storable-text.js';
import { principalOf } from '../auth-plugin.js';
import {
  checkBody,
  checkIdempotencyKey,
  fingerprint,
  type BodyCheck,
  type IdempotencyKeyCheck,
} from '../../generations/generation-request.js';
import { sendGeneration } from '../conditional-reads.js';
import type { GenerationWaiters } from '../generation-waiters.js';
import { honourPreferWait } from '../prefer-wait.js';
import { providerOf, refusalWhileDown } from '../../generations/provider-availability.js';
import { toGeneration } from '../generation-view.js';
import { pageOfGenerations } from '../../generations/list-query.js';
import { routeSchemas } from '../route-schemas.js';
import {
  startGeneration,
  type StartGenerationDeps,
  type StartOutcome,
} from '../../generations/start-generation.js';
import type { ZodApp } from '../zod-type-provider.js';

export interface GenerationRouteDeps extends StartGenerationDeps {
  db: CommonQueryMethods;
  /** Generation records by id, dropped when PostgreSQL announces a change: polling costs no query. */
  cache: InvalidatedCache<string, GenerationRow | null>;
  catalog: CatalogCache;
  /** Seconds until a down provider is probed again; null when it takes requests. */
  providerDownFor?: (provider: string) => number | null;
  /** Counts the POSTs refused here (validation, a provider that is down); admission's refusals are the worker's. */
  metrics?: ApiGenerationMetrics;
  /** Requests held by `Prefer: wait`, and the longest wait allowed in seconds (at most 60). */
  waiting?: { waiters: GenerationWaiters; maxSeconds: number };
}

/**
 * POST /v1/generations, GET /v1/generations/{id} and GET /v1/generations.
 * POST starts the generation with update-with-start (startGeneration); reads come from the
 * PostgreSQL projection only, never from Temporal.
 */
export function generationRoutes(app: ZodApp, deps: GenerationRouteDeps): void {
  // The body's text is checked by checkBody, so that the rejection is recorded like any other invalid request.
  app.post(
    '/v1/generations',
    { schema: routeSchemas.createGeneration, config: { checksOwnBody: true } },
    async (request, reply) => {
      const principal = principalOf(request);
      const key = checkIdempotencyKey(request.headers['idempotency-key']);
      const body = checkBody(deps.catalog, request.body);
      if (!key.ok || !body.ok) return reject(reply, principal, key, body);

      // A retry of an accepted request is answered with its generation even while the provider is
      // down: only a new generation is refused (issue 19, item 3).
      const started = await startGeneration(
        deps,
        {
          accountId: principal.accountId,
          apiKeyId: principal.keyId,
          idempotencyKey: key.key,
          model: body.model.entry,
          input: body.input,
          fingerprint: fingerprint(request.body),
        },
        { refuseNew: providerDownRefusal(body.model.entry) },
      );
      reply.header('x-request-id', started.generationId);
      if (started.outcome !== 'admitted') throw await refusal(started, request.log);
      // From here the generation may be charged: whatever fails, the answer is its 202, never an
      // error a client would retry (without an Idempotency-Key, paying again).
      const row = await readAfterStart(request, principal.accountId, started);
      const answer = row ? await waitIfPreferred(request, reply, row, principal) : started.known;
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
    started: Extract<StartOutcome, { outcome: 'admitted' }>,
  ): Promise<GenerationRow | null> {
    const about = { generation_id: started.generationId, request_id: request.id };
    try {
      const row = await readGeneration(accountId, started.generationId);
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

  /**
   * A provider that is down gets no new jobs: the POST is refused before anything is charged, with
   * the time of the next probe as Retry-After, instead of debiting and refunding each request. The
   * refusal is thrown only for a request that is not a retry of an accepted one (see
   * startGeneration); undefined while the provider takes requests (the usual case costs nothing).
   */
  function providerDownRefusal(entry: CatalogEntry): (() => never) | undefined {
    return refusalWhileDown(entry, deps.providerDownFor?.(providerOf(entry)) ?? null, () =>
      deps.metrics?.rejected(entry.id, 'service_unavailable'),
    );
  }

  app.get('/v1/generations/:id', { schema: routeSchemas.getGeneration }, async (request, reply) => {
    // `/v1/generations/quote` is a path of its own (POST only): not a generation named "quote".
    if (request.url.split('?')[0] === '/v1/generations/quote') {
      reply.header('allow', 'POST');
      throw new ApiError('method_not_allowed', '/v1/generations/quote does not accept GET; it accepts POST.');
    }
    const { id } = request.params; // empty when it cannot name a generation
    const accountId = principalOf(request).accountId;
    const row = id ? await readGeneration(accountId, id) : null;
    if (!row) throw new ApiError('not_found', 'No generation with this id in this account.');
    reply.header('x-request-id', row.id);
    const answer = await waitIfPreferred(request, reply, row, principalOf(request));
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
      reread: () => readGeneration(principal.accountId, row.id),
    });
  }

  app.get('/v1/generations', { schema: routeSchemas.listGenerations }, async (request) => {
    const { query } = request;
    const limit = query.limit ?? 20;
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

  /**
   * The account's generation, from the cache when it holds one (PostgreSQL announces every change
   * that a read shows). Another account's generation is as unknown as one that does not exist.
   */
  async function readGeneration(accountId: string, id: string): Promise<GenerationRow | null> {
    const row =
      deps.cache.peek(id) ??
      (await deps.cache.get(
        id,
        () => getGeneration(deps.db, accountId, id),
        (r) => r !== null,
      ));
    return row?.account_id === accountId ? row : null;
  }

  /** A request that never became a job: recorded (so it is listed and x-request-id names it), key not claimed. */
  async function reject(
    reply: FastifyReply,
    principal: { accountId: string; keyId: string },
    key: IdempotencyKeyCheck,
    body: BodyCheck,
  ): Promise<never> {
    const issues = [...(key.ok ? [] : [key.issue]), ...(body.ok ? [] : body.issues)];
    const what = body.ok ? { model: body.model.entry.id, mediaType: body.model.entry.media_type } : body;
    const id = newId('gen');
    const error = new ValidationError(issues, 'The request is invalid.');
    // A model the catalog does not know is not a label: the client could send any text.
    deps.metrics?.rejected(body.ok || body.mediaType !== 'unknown' ? what.model : 'unknown', error.code);
    await recordRejectedRequest(deps.db, {
      id,
      accountId: principal.accountId,
      apiKeyId: principal.keyId,
      model: what.model,
      mediaType: what.mediaType,
      input: null,
      // Issues never quote what was sent; toStorableText keeps it that way should a message ever do.
      error: {
        code: error.code,
        message: toStorableText(issues.map((i) => `${i.field || 'body'}: ${i.message}`).join(' ')),
      },
    });
    reply.header('x-request-id', id);
    throw error;
  }

  /**
   * The error a request that will not run answers with. Its inline images are not kept: a
   * conflict's are its own (another fingerprint, another folder), a rejected generation's are never read.
   */
  async function refusal(
    refused: Exclude<StartOutcome, { outcome: 'admitted' }>,
    log: FastifyBaseLogger,
  ): Promise<ApiError> {
    // The answer stands if the store fails: images left behind are never read, and the bucket's
    // lifecycle rule (docs/operating.md, Object storage) removes them in the end.
    if (refused.inputPrefix)
      await deps.storage.deletePrefix(refused.inputPrefix).catch((error: unknown) => {
        log.warn(
          { err: error, prefix: refused.inputPrefix },
          "a refused request's inline images could not be deleted",
        );
      });
    return refused.outcome === 'conflict'
      ? idempotencyConflict(refused.generationId)
      : admissionRefusal(refused.error, refused.generationId);
  }
}
