import type { CatalogEntry } from '../../catalog/catalog-entry.js';
import type { GenerationRow } from '../../db/generation-reads.js';
import type { GenerationError } from '../../vocabulary/generation.js';
import type { AdmitResult } from '../../workflows/generation-types.js';

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

/** What the outcome is told of the request (see startGeneration's CheckedRequest). */
export interface OutcomeRequest {
  accountId: string;
  model: Pick<CatalogEntry, 'id' | 'media_type'>;
  fingerprint: string;
  batch?: { batchId: string; customId: string };
  /** Its Cancel-After deadline (ISO), if it has one. */
  cancelAfter?: string;
}

/**
 * The request's outcome from its workflow's answer. `holder`: the generation the key's record
 * named, if one was read (it answers as the record shows it); `stored`: the input this request
 * stored and its folder (none when it met a running workflow without storing anything).
 */
export function outcomeOf(
  request: OutcomeRequest,
  admitted: AdmitResult,
  holder: GenerationRow | null,
  stored: { input: Record<string, unknown> | null; prefix: string | null },
  createdAt: string,
): StartOutcome {
  const { generationId, admission } = admitted;
  if (admitted.fingerprint !== request.fingerprint)
    return { outcome: 'conflict', generationId, inputPrefix: stored.prefix };
  if (admission.outcome === 'rejected')
    return { outcome: 'rejected', generationId, error: admission.error, inputPrefix: stored.prefix };
  // Another generation (the key's) is known from its record when one was read. Without one it was
  // admitted by a request sent at about the same time, with this body: the same stored input (its
  // folder is named by the key and body), and the creation time its workflow answered with.
  const known =
    holder?.id === generationId
      ? holder
      : asAdmitted(request, admitted, stored.input, admitted.createdAt ?? createdAt);
  return { outcome: 'admitted', generationId, known };
}

/**
 * An accepted generation's row as admission writes it (src/activities/debit.ts): queued,
 * debited its credits, nothing refunded, the input as stored (null when this request stored none).
 */
export function asAdmitted(
  request: OutcomeRequest,
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
    batch_id: request.batch?.batchId ?? null,
    custom_id: request.batch?.customId ?? null,
    cancel_after: request.cancelAfter ?? null,
  };
}
