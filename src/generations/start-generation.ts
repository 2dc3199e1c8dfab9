import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { createHash } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import type { GenerationRow } from '../db/generation-reads.js';
import { keyHolder, type KeyHolder } from '../db/idempotency-keys.js';
import { ApiError } from '../errors.js';
import type { GenerationError } from '../generation.js';
import { newId } from '../ids.js';
import type { Storage } from '../storage/storage.js';
import type { AdmitResult, GenerationStart } from '../workflows/generation-types.js';
import { admitUpdate, generationWorkflow } from '../workflows/generation-workflow.js';
import {
  AccountId,
  GenerationId,
  GenerationStatus as GenerationStatusKey,
  Model,
  NeedsReview,
} from '../workflows/search-attributes.js';
import { storeInlineImages } from './generation-request.js';
import { askNewestRun } from './newest-run.js';

export interface StartGenerationDeps {
  /** Where Idempotency-Key records are read (see keyHolder). */
  db: CommonQueryMethods;
  temporal: Client;
  taskQueue: string;
  storage: Storage;
  /** How long POST waits for admission and handover before answering 503 (the key stays claimed; a retry gets the outcome). */
  admissionTimeoutMs: number;
  timing: GenerationStart['timing'];
  /** Now, in ms: the request's creation time and the key horizon are judged by it (default Date.now). */
  clock?: () => number;
}

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
}

/**
 * How the request ended at admission, and the generation that answers it: a new one, or for a
 * retry with an Idempotency-Key the one the key already names. A conflict is checked first: a
 * retry with another body learns of that whatever became of the first request. A request that
 * will not run names the folder of the inline images it stored, if any, for the caller to delete.
 */
export type StartOutcome =
  | {
      outcome: 'admitted';
      generationId: string;
      /**
       * The generation as this request last knew it (what admission made of a new one: queued and
       * debited; an earlier one as its key's record showed it), for the caller to answer with when
       * it cannot read the generation: an admitted request is answered with its generation, never
       * with an error, since it may be charged.
       */
      known: GenerationRow;
    }
  | { outcome: 'conflict'; generationId: string; inputPrefix: string | null }
  | { outcome: 'rejected'; generationId: string; error: GenerationError; inputPrefix: string | null };

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
  const admitted = await admitAnew(deps, start, now);
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
  admitted: AdmitResult,
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
 * The answer of the generation that holds the key in a workflow still running (its record may not
 * be written yet, or it is still queued), asked without starting one; null when none runs, or its
 * generation no longer holds the key. A Temporal that cannot be asked is as good as none: the
 * request is then refused (503) like a new one, which a retry with the same key puts right.
 */
async function meetRunning(
  deps: StartGenerationDeps,
  workflowId: string,
  now: () => number,
): Promise<AdmitResult | null> {
  try {
    const answer = await deps.temporal.connection.withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
      askNewestRun(() =>
        deps.temporal.workflow
          .getHandle(workflowId)
          .executeUpdate(admitUpdate, { updateId: `admit-${workflowId}` }),
      ),
    );
    return Date.parse(answer.keyHeldUntil) > now() ? answer : null;
  } catch {
    // No run (WorkflowNotFoundError: none, or it has closed), or Temporal did not answer in time.
    return null;
  }
}

/**
 * A retry answered from the key's record, as its generation's workflow would answer it: another
 * body is a conflict whatever became of the first request; a refusal that claimed the key keeps its
 * error; a generation that has ended (succeeded or failed) is admitted as it now stands. One still
 * queued is left to its workflow (null): a retry then waits for the handover, as the first request did.
 */
function answerFromRecord(holder: KeyHolder, fingerprint: string): StartOutcome | null {
  const { row } = holder;
  const generationId = row.id;
  if (holder.fingerprint !== fingerprint) return { outcome: 'conflict', generationId, inputPrefix: null };
  if (row.status === 'rejected' && row.error)
    return { outcome: 'rejected', generationId, error: row.error, inputPrefix: null };
  if (row.status === 'succeeded' || row.status === 'failed')
    return { outcome: 'admitted', generationId, known: row };
  return null;
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
          startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
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
          }),
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
