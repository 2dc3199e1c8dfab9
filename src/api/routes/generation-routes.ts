import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import { createHash } from 'node:crypto';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import { toValidationIssues } from '../../catalog/request-schema.js';
import { getGeneration, listGenerations, type GenerationRow } from '../../db/generation-reads.js';
import { recordRejectedRequest } from '../../db/admission-repository.js';
import type { InvalidatedCache } from '../../invalidated-cache.js';
import { ApiError, ValidationError, errorCodes, type ErrorCode, type ValidationIssue } from '../../errors.js';
import { newId } from '../../ids.js';
import { toStorableText } from '../../storable-text.js';
import type { Storage } from '../../storage/storage.js';
import type { GenerationError } from '../../generation.js';
import type { GenerationStart } from '../../workflows/generation-types.js';
import { admitUpdate, generationWorkflow } from '../../workflows/generation-workflow.js';
import {
  AccountId,
  GenerationStatus as GenerationStatusKey,
  Model,
  NeedsReview,
} from '../../workflows/search-attributes.js';
import { principalOf } from '../auth-plugin.js';
import { checkBody, checkIdempotencyKey, fingerprint, storeInlineImages } from '../generation-request.js';
import { toGeneration } from '../generation-view.js';
import { encodeCursor, generationIdPattern, listGenerationsQuerySchema } from '../list-query.js';

export interface GenerationRouteDeps {
  db: CommonQueryMethods;
  /** Generation records by id, dropped when PostgreSQL announces a change: polling costs no query. */
  cache: InvalidatedCache<string, GenerationRow | null>;
  catalog: CatalogCache;
  temporal: Client;
  taskQueue: string;
  storage: Storage;
  /** How long POST waits for admission and handover before answering 503 (the key stays claimed; a retry gets the outcome). */
  admissionTimeoutMs: number;
  timing: GenerationStart['timing'];
}

/**
 * POST /v1/generations, GET /v1/generations/{id} and GET /v1/generations.
 * POST is one round trip to Temporal (update-with-start); reads come from the
 * PostgreSQL projection only, never from Temporal.
 */
export function generationRoutes(app: FastifyInstance, deps: GenerationRouteDeps): void {
  // The body's text is checked by checkBody, so that the rejection is recorded like any other invalid request.
  app.post('/v1/generations', { config: { checksOwnBody: true } }, async (request, reply) => {
    const principal = principalOf(request);
    const key = checkIdempotencyKey(request.headers['idempotency-key']);
    const body = checkBody(deps.catalog, request.body);
    if (!key.ok || !body.ok) {
      const issues = [...(key.ok ? [] : [key.issue]), ...(body.ok ? [] : body.issues)];
      return reject(
        reply,
        principal,
        body.ok ? { model: body.model.entry.id, mediaType: body.model.entry.media_type } : body,
        issues,
      );
    }

    const generationId = newId('gen');
    const workflowId = key.key
      ? `generation-${createHash('sha256').update(`${principal.keyId}\u0000${key.key}`).digest('hex').slice(0, 40)}`
      : `generation-${generationId}`;
    const requestFingerprint = fingerprint(request.body);
    const stored = await storeInlineImages(
      deps.storage,
      body.input,
      key.key ? `${workflowId}:${requestFingerprint}` : null,
    );
    const start: GenerationStart = {
      generationId,
      workflowId,
      accountId: principal.accountId,
      apiKeyId: principal.keyId,
      model: body.model.entry.id,
      mediaType: body.model.entry.media_type,
      input: stored.input,
      fingerprint: requestFingerprint,
      idempotencyKey: key.key,
      inputPrefix: stored.prefix,
      createdAt: new Date().toISOString(),
      timing: deps.timing,
    };
    const admit = (updateId: string) =>
      deps.temporal.connection
        .withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
          deps.temporal.workflow.executeUpdateWithStart(admitUpdate, {
            updateId,
            startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
              workflowId,
              taskQueue: deps.taskQueue,
              args: [start],
              workflowIdConflictPolicy: 'USE_EXISTING',
              staticSummary: `${start.model} for ${start.accountId}: ${String(start.input.prompt).slice(0, 80)}`,
              typedSearchAttributes: [
                { key: GenerationStatusKey, value: 'queued' },
                { key: AccountId, value: start.accountId },
                { key: Model, value: start.model },
                { key: NeedsReview, value: false },
              ],
            }),
          }),
        )
        .catch((error: unknown) => {
          throw new ApiError(
            'service_unavailable',
            'Admission did not complete in time. Retry with the same Idempotency-Key and body.',
            {
              requestId: key.key ? undefined : generationId,
              cause: error,
            },
          );
        });
    let admitted = await admit(`admit-${workflowId}`);
    if (admitted.generationId !== generationId && Date.parse(admitted.keyHeldUntil) <= Date.now()) {
      // The outcome is an earlier generation's that no longer holds this key: it passed its horizon, or was
      // rejected without claiming the key (the concurrency limit). Temporal answers a repeated update id with
      // that old outcome even after its run closed, so this request asks again under an update id of its
      // own, which starts a new run.
      admitted = await admit(`admit-${workflowId}-${generationId}`);
    }
    reply.header('x-request-id', admitted.generationId);
    const conflict = admitted.fingerprint !== requestFingerprint;
    // Inline images of a request that will never run are not kept: a conflict's are its own (another
    // fingerprint, another folder), and a rejected generation's are never read.
    if (stored.prefix && (conflict || admitted.admission.outcome === 'rejected'))
      await deps.storage.deletePrefix(stored.prefix);
    if (conflict) {
      throw new ApiError(
        'idempotency_conflict',
        'This Idempotency-Key was used with a different request body. Use a new key for a new generation.',
        {
          requestId: admitted.generationId,
        },
      );
    }
    const { admission } = admitted;
    if (admission.outcome === 'rejected') throw admissionRefusal(admission.error, admitted.generationId);
    // Through the cache: the client's first polls of a new generation are answered from memory.
    const row = await readGeneration(principal.accountId, admitted.generationId);
    if (!row) throw new Error(`admitted generation ${admitted.generationId} has no projection row`);
    return reply.code(202).send(toGeneration(row));
  });

  app.get<{ Params: { id: string } }>('/v1/generations/:id', async (request, reply) => {
    const { id } = request.params;
    const accountId = principalOf(request).accountId;
    const row = generationIdPattern.test(id) ? await readGeneration(accountId, id) : null;
    if (!row) throw new ApiError('not_found', 'No generation with this id in this account.');
    reply.header('x-request-id', row.id);
    return toGeneration(row);
  });

  app.get('/v1/generations', async (request) => {
    const parsed = listGenerationsQuerySchema.safeParse(request.query);
    if (!parsed.success) throw new ValidationError(toValidationIssues(parsed.error));
    const query = parsed.data;
    const limit = query.limit ?? 20;
    const rows = await listGenerations(deps.db, {
      accountId: principalOf(request).accountId,
      limit: limit + 1,
      statuses: query.status ?? null,
      model: query.model ?? null,
      after: query.cursor ?? null,
    });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      data: page.map(toGeneration),
      next_cursor:
        rows.length > limit && last ? encodeCursor({ createdAt: last.created_at, id: last.id }) : null,
    };
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
    what: { model: string; mediaType: string },
    issues: ValidationIssue[],
  ): Promise<never> {
    const id = newId('gen');
    const error = new ValidationError(issues, 'The request is invalid.');
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
}

/**
 * The API error a refused admission answers with: its code's status, 400 for a code the API does
 * not know (sendError gives every 400 its issues).
 */
function admissionRefusal(error: GenerationError, requestId: string): ApiError {
  const code: ErrorCode = error.code in errorCodes ? (error.code as ErrorCode) : 'invalid_request';
  return new ApiError(code, error.message, { requestId });
}
