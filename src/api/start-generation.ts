import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import { createHash } from 'node:crypto';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import { ApiError } from '../errors.js';
import type { GenerationError } from '../generation.js';
import { newId } from '../ids.js';
import type { Storage } from '../storage/storage.js';
import type { AdmitResult, GenerationStart } from '../workflows/generation-types.js';
import { admitUpdate, generationWorkflow } from '../workflows/generation-workflow.js';
import {
  AccountId,
  GenerationStatus as GenerationStatusKey,
  Model,
  NeedsReview,
} from '../workflows/search-attributes.js';
import { storeInlineImages } from './generation-request.js';

export interface StartGenerationDeps {
  temporal: Client;
  taskQueue: string;
  storage: Storage;
  /** How long POST waits for admission and handover before answering 503 (the key stays claimed; a retry gets the outcome). */
  admissionTimeoutMs: number;
  timing: GenerationStart['timing'];
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
}

/**
 * How the request ended at admission, and the generation that answers it: a new one, or for a
 * retry with an Idempotency-Key the one the key already names. A conflict is checked first: a
 * retry with another body learns of that whatever became of the first request. A request that
 * will not run names the folder of the inline images it stored, if any, for the caller to delete.
 */
export type StartOutcome =
  | { outcome: 'admitted'; generationId: string }
  | { outcome: 'conflict'; generationId: string; inputPrefix: string | null }
  | { outcome: 'rejected'; generationId: string; error: GenerationError; inputPrefix: string | null };

/**
 * The workflow a request runs in. With an Idempotency-Key it is derived from the API key and the
 * Idempotency-Key, so that a retry meets the first request's workflow; without one it is the new
 * generation's own.
 */
function generationWorkflowId(keyId: string, key: string | null, generationId: string): string {
  if (key === null) return `generation-${generationId}`;
  const digest = createHash('sha256').update(`${keyId}\u0000${key}`).digest('hex');
  return `generation-${digest.slice(0, 40)}`;
}

/**
 * Starts the request's generation, or meets the one its Idempotency-Key names: stores its inline
 * images, then one update-with-start to Temporal that answers once admission is decided (and an
 * accepted job handed over).
 */
export async function startGeneration(
  deps: StartGenerationDeps,
  request: CheckedRequest,
): Promise<StartOutcome> {
  const generationId = newId('gen');
  const workflowId = generationWorkflowId(request.apiKeyId, request.idempotencyKey, generationId);
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
    createdAt: new Date().toISOString(),
    timing: deps.timing,
  };
  const admitted = await admitAnew(deps, start);
  const { generationId: answeredBy, admission } = admitted;
  if (admitted.fingerprint !== request.fingerprint)
    return { outcome: 'conflict', generationId: answeredBy, inputPrefix: stored.prefix };
  if (admission.outcome === 'rejected')
    return {
      outcome: 'rejected',
      generationId: answeredBy,
      error: admission.error,
      inputPrefix: stored.prefix,
    };
  return { outcome: 'admitted', generationId: answeredBy };
}

/**
 * Admits the request, asking again when the answer is an earlier generation's that no longer holds
 * the key: it passed its horizon, or was rejected without claiming the key (the concurrency limit).
 * Temporal answers a repeated update id with that old outcome even after its run closed, so the
 * second ask uses an update id of this request's own, which starts a new run.
 */
async function admitAnew(deps: StartGenerationDeps, start: GenerationStart): Promise<AdmitResult> {
  const admitted = await admit(deps, start, `admit-${start.workflowId}`);
  if (admitted.generationId === start.generationId || Date.parse(admitted.keyHeldUntil) > Date.now())
    return admitted;
  return admit(deps, start, `admit-${start.workflowId}-${start.generationId}`);
}

/** One update-with-start: the workflow is started unless it runs already, then asked to admit. */
function admit(deps: StartGenerationDeps, start: GenerationStart, updateId: string): Promise<AdmitResult> {
  return deps.temporal.connection
    .withDeadline(Date.now() + deps.admissionTimeoutMs, () =>
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
          ],
        }),
      }),
    )
    .catch((error: unknown) => {
      throw new ApiError(
        'service_unavailable',
        'Admission did not complete in time. Retry with the same Idempotency-Key and body.',
        { requestId: start.idempotencyKey ? undefined : start.generationId, cause: error },
      );
    });
}
