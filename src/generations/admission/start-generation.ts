import { createHash } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import type { Storage } from '../../storage/storage.js';
import type { CatalogEntry } from '../../catalog/catalog-entry.js';
import { keyHolder } from '../../db/idempotency-keys.js';
import { ApiError } from '../../vocabulary/errors.js';
import { newId } from '../../vocabulary/ids.js';
import type { GenerationStart } from '../../workflows/generation-types.js';
import { askToAdmit, type AdmitUpdateDeps } from './admit-update.js';
import { storeInlineImages } from './inline-images.js';
import { answerFromRecord } from './key-answers.js';
import { asAdmitted, outcomeOf, type StartOutcome } from './start-outcome.js';
import { answerUnanswered } from './unanswered-admission.js';

export type { StartOutcome } from './start-outcome.js';

/** What startGeneration reads and acts through. */
export interface StartGenerationDeps extends AdmitUpdateDeps {
  /** Where Idempotency-Key records are read (see keyHolder). */
  db: CommonQueryMethods;
  /** Where the request's inline images are stored before the workflow starts. */
  storage: Storage;
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
  /** The price quoted now (what admission debits if it accepts), for an answer given without it. */
  credits?: number;
  /** The batch line it is, if any (see GenerationStart's `batch`). */
  batch?: GenerationStart['batch'];
  /** The Cancel-After header's duration, in seconds (see cancel-after.ts); absent: none. */
  cancelAfterSeconds?: number;
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
 * Starts the request's generation, or meets the one its Idempotency-Key names, in this order: a
 * key whose record (PostgreSQL) names a generation that has ended is answered from it, without
 * Temporal (key-answers.ts); while no new generation may start (refuseNew), the running workflow
 * of the generation the key names answers, if there is one, and nothing starts; otherwise the
 * request's inline images are stored, then one update-with-start answers once admission is
 * decided, and an accepted job handed over (admit-update.ts); the outcome is read from that answer (start-outcome.ts), or, for
 * a request without a key whose admission did not answer in time, settled as unanswered-admission.ts says.
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
    refuseNew?: () => never;
  } = {},
): Promise<StartOutcome> {
  const now = deps.clock ?? Date.now;
  const key = request.idempotencyKey;
  const generationId = newId('gen');
  const workflowId = generationWorkflowId(request.apiKeyId, key, generationId);
  const holder = key === null ? null : await keyHolder(deps.db, request.apiKeyId, key, new Date(now()));
  const answer = holder && answerFromRecord(holder, request.fingerprint);
  if (answer) return answer;
  // While no new generation may start, only the running workflow of the generation the key names
  // answers (a retry of a request that was accepted), and nothing is stored for this one.
  const { refuseNew } = options;
  if (refuseNew && key === null) refuseNew();
  const meetOnly = refuseNew !== undefined;
  const folderSeed = key ? `${workflowId}:${request.fingerprint}` : null;
  const stored = meetOnly ? noImages : await storeInlineImages(deps.storage, request.input, folderSeed);
  const createdAt = now();
  const cancelAfter =
    request.cancelAfterSeconds === undefined
      ? undefined
      : new Date(createdAt + request.cancelAfterSeconds * 1000).toISOString();
  const start: GenerationStart = {
    generationId,
    workflowId,
    accountId: request.accountId,
    apiKeyId: request.apiKeyId,
    model: request.model.id,
    mediaType: request.model.media_type,
    input: stored.input ?? request.input,
    fingerprint: request.fingerprint,
    idempotencyKey: key,
    inputPrefix: stored.prefix,
    createdAt: new Date(createdAt).toISOString(),
    ...(request.routes ? { routes: request.routes } : {}),
    timing: deps.timing,
    ...(request.webhook ? { webhook: request.webhook } : {}),
    ...(request.batch ? { batch: request.batch } : {}),
    ...(cancelAfter ? { cancelAfter } : {}),
  };
  const told = cancelAfter ? { ...request, cancelAfter } : request;
  // One update-with-start answers once admission is decided (meetOnly: only a running workflow).
  const asked = await askToAdmit(deps, start, now, meetOnly);
  if (refuseNew && !('admitted' in asked)) refuseNew();
  if ('admitted' in asked)
    return outcomeOf(told, asked.admitted, holder?.row ?? null, stored, start.createdAt);
  // Without a key no retry can meet this generation: it must not be charged behind a 503.
  if (key !== null || !(asked.failure instanceof ApiError)) throw asked.failure;
  // Should admission have decided first, unread: as it makes a generation it accepts, at the price quoted.
  const accepted = { outcome: 'accepted' as const, credits: request.credits ?? 0 };
  const assumed = asAdmitted(told, { generationId, admission: accepted }, start.input, start.createdAt);
  return answerUnanswered(deps.db, start, asked.failure, assumed);
}

/** What a request that may only meet a running workflow stores: nothing. */
const noImages = { input: null, prefix: null };
