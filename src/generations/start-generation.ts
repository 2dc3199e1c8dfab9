import { WithStartWorkflowOperation } from '@temporalio/client';
import { createHash } from 'node:crypto';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import type { GenerationRow } from '../db/generation-reads.js';
import { keyHolder } from '../db/idempotency-keys.js';
import { ApiError } from '../errors.js';
import { newId } from '../ids.js';
import type { AdmitResult, GenerationStart } from '../workflows/generation-types.js';
import { admitUpdate, type generationWorkflow } from '../workflows/generation-workflow.js';
import {
  AccountId,
  GenerationId,
  GenerationStatus as GenerationStatusKey,
  Model,
  NeedsReview,
} from '../workflows/search-attributes.js';
import { storeInlineImages } from './generation-request.js';
import { answerFromRecord, meetRunning } from './key-holder-answers.js';
import type { StartGenerationDeps, StartOutcome } from './start-types.js';
import { askNewestRun } from './newest-run.js';
import { answerUnanswered } from './unanswered-admission.js';

export type { StartGenerationDeps, StartOutcome } from './start-types.js';

/** A request that passed validation, from an authenticated key. */
interface CheckedRequest {
  accountId: string;
  apiKeyId: string;
  idempotencyKey: string | null;
  model: Pick<CatalogEntry, 'id' | 'media_type'>;
  /** The accepted fields other than `model`; inline images are still data URIs. */
  input: Record<string, unknown>;
  fingerprint: string;
  /** The request's webhook subscription, if any: the generation's workflow starts its deliveries. */
  webhook?: GenerationStart['webhook'];
  /** The routes to try, in order (see routePlanOf); absent: the model's one route. */
  routes?: GenerationStart['routes'];
  /** The price quoted now (what admission debits if it accepts), for an answer given without it. */
  credits?: number;
}

/**
 * The workflow a request runs in. With an Idempotency-Key it is derived from the API key and the
 * Idempotency-Key, so that a retry meets the first request's workflow; without one it is the new
 * generation's own.
 */
export function generationWorkflowId(keyId: string, key: string | null, generationId: string): string {
  if (key === null) return `generation-${generationId}`;
  const digest = createHash('sha256').update(`${keyId}\u0000${key}`).digest('hex');
  return `generation-${digest.slice(0, 40)}`;
}

/**
 * Starts the request's generation, or meets the one its Idempotency-Key names. A key whose record
 * (PostgreSQL) names a generation that has ended is answered from it, without Temporal; otherwise
 * the request's inline images are stored, then one update-with-start to Temporal answers once
 * admission is decided (and an accepted job handed over), or meets the running workflow of the
 * generation the key names.
 */
export async function startGeneration(
  deps: StartGenerationDeps,
  request: CheckedRequest,
  options: {
    /**
     * Set when no new generation may start now (its provider is down): throws the refusal. Called only once the
     * request is known not to be a retry of one that was accepted: a retry is answered with that
     * generation (from the key's record, or from its running workflow) whatever the provider's state.
     */
    refuseNew?: () => void;
  } = {},
): Promise<StartOutcome> {
  const now = deps.clock ?? Date.now;
  const holder =
    request.idempotencyKey === null
      ? null
      : await keyHolder(deps.db, request.apiKeyId, request.idempotencyKey, new Date(now()));
  const answer = holder && answerFromRecord(holder, request.fingerprint);
  if (answer) return answer;
  const generationId = newId('gen');
  const workflowId = generationWorkflowId(request.apiKeyId, request.idempotencyKey, generationId);
  if (options.refuseNew) {
    const running = request.idempotencyKey === null ? null : await meetRunning(deps, workflowId, now);
    if (running) {
      const known =
        holder?.row.id === running.generationId
          ? holder.row
          : asAdmitted(request, running, null, new Date(now()).toISOString());
      return outcomeOf(running, request.fingerprint, null, known);
    }
    options.refuseNew();
  }
  const stored = await storeInlineImages(
    deps.storage,
    request.input,
    request.idempotencyKey ? `${workflowId}:${request.fingerprint}` : null,
  ).catch((error: unknown) => {
    // Nothing has started and nothing is charged: the same request may simply be sent again.
    throw new ApiError(
      'service_unavailable',
      'Inline images could not be stored. Retry with the same Idempotency-Key and body.',
      { cause: error },
    );
  });
  const start: GenerationStart = {
    generationId,
    workflowId,
    accountId: request.accountId,
    apiKeyId: request.apiKeyId,
    model: request.model.id,
    mediaType: request.model.media_type,
    input: stored.input,
    fingerprint: request.fingerprint,
    idempotencyKey: request.idempotencyKey,
    inputPrefix: stored.prefix,
    createdAt: new Date(now()).toISOString(),
    ...(request.routes ? { routes: request.routes } : {}),
    timing: deps.timing,
    ...(request.webhook ? { webhook: request.webhook } : {}),
  };
  let admitted: AdmitResult;
  try {
    admitted = await admitAnew(deps, start, now);
  } catch (error) {
    // Without a key no retry can meet this generation: it must not be charged behind a 503.
    if (request.idempotencyKey !== null || !(error instanceof ApiError)) throw error;
    // Should admission have decided first, unread: as it makes a generation it accepts, at the price quoted.
    const accepted = { outcome: 'accepted' as const, credits: request.credits ?? 0 };
    const assumed = asAdmitted(request, { generationId, admission: accepted }, stored.input, start.createdAt);
    return answerUnanswered(deps.db, start, error, assumed);
  }
  // Another generation (the key's) is known from its record when one was read. Without one it was
  // admitted by a request sent at about the same time, with this body: the same stored input
  // (its folder is named by the key and body), and about this creation time.
  const known =
    holder?.row.id === admitted.generationId
      ? holder.row
      : asAdmitted(request, admitted, stored.input, start.createdAt);
  return outcomeOf(admitted, request.fingerprint, stored.prefix, known);
}

/** The request's outcome from its workflow's answer (`inputPrefix`: the images this request stored). */
function outcomeOf(
  admitted: AdmitResult,
  fingerprint: string,
  inputPrefix: string | null,
  known: GenerationRow,
): StartOutcome {
  const { generationId, admission } = admitted;
  if (admitted.fingerprint !== fingerprint) return { outcome: 'conflict', generationId, inputPrefix };
  if (admission.outcome === 'rejected')
    return { outcome: 'rejected', generationId, error: admission.error, inputPrefix };
  return { outcome: 'admitted', generationId, known };
}

/**
 * An accepted generation's row as admission writes it (src/activities/admission.ts): queued,
 * debited its credits, nothing refunded, the input as stored (null when this request stored none).
 */
function asAdmitted(
  request: CheckedRequest,
  admitted: Pick<AdmitResult, 'generationId' | 'admission'>,
  input: Record<string, unknown> | null,
  createdAt: string,
): GenerationRow {
  return {
    id: admitted.generationId,
    account_id: request.accountId,
    status: 'queued',
    model: request.model.id,
    media_type: request.model.media_type,
    credits: admitted.admission.outcome === 'accepted' ? admitted.admission.credits : 0,
    credits_refunded: false,
    input,
    output: null,
    error: null,
    needs_review: false,
    content_expired: false,
    provider: null,
    created_at: createdAt,
    completed_at: null,
    expires_at: null,
  };
}

/**
 * Admits the request, asking again when the answer is an earlier generation's that no longer holds
 * the key: it passed its horizon, or was rejected without claiming the key (the concurrency limit).
 * Temporal answers a repeated update id with that old outcome even after its run closed, so the
 * second ask uses an update id of this request's own, which starts a new run.
 */
async function admitAnew(
  deps: StartGenerationDeps,
  start: GenerationStart,
  now: () => number,
): Promise<AdmitResult> {
  const admitted = await admit(deps, start, `admit-${start.workflowId}`);
  if (admitted.generationId === start.generationId || Date.parse(admitted.keyHeldUntil) > now())
    return admitted;
  return admit(deps, start, `admit-${start.workflowId}-${start.generationId}`);
}

/** One update-with-start: the workflow is started unless it runs already, then asked to admit. */
function admit(deps: StartGenerationDeps, start: GenerationStart, updateId: string): Promise<AdmitResult> {
  return deps.temporal.connection
    .withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
      // The run the update lands on may continue as new before it answers: the newest one answers.
      askNewestRun(() =>
        deps.temporal.workflow.executeUpdateWithStart(admitUpdate, {
          updateId,
          startWorkflowOperation: new WithStartWorkflowOperation<typeof generationWorkflow>(
            'generationWorkflow',
            {
              workflowId: start.workflowId,
              taskQueue: deps.taskQueue,
              args: [start],
              workflowIdConflictPolicy: 'USE_EXISTING',
              staticSummary: `${start.model} for ${start.accountId}: ${String(start.input.prompt).slice(0, 80)}`,
              typedSearchAttributes: [
                { key: GenerationStatusKey, value: 'queued' },
                { key: AccountId, value: start.accountId },
                { key: Model, value: start.model },
                { key: NeedsReview, value: false },
                { key: GenerationId, value: start.generationId },
              ],
            },
          ),
        }),
      ),
    )
    .catch((error: unknown) => {
      throw new ApiError(
        'service_unavailable',
        'Admission did not complete in time. Retry with the same Idempotency-Key and body.',
        { requestId: start.idempotencyKey ? undefined : start.generationId, cause: error },
      );
    });
}
