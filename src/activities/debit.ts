import type { CommonQueryMethods } from 'slonik';
import { catalogEntryOf, type CatalogEntry } from '../catalog/catalog-entry.js';
import { quotePrice, resolveOptions } from '../catalog/pricing.js';
import { decideDebit, recordRefusal, type DebitRecord } from '../db/debit-repository.js';
import type { GenerationError } from '../vocabulary/generation.js';
import { noGenerationMetrics, type GenerationMetrics } from '../observability/metrics.js';
import { debitRefusals } from '../workflows/generation-errors.js';
import type { DebitOutcome, GenerationStart, KeyClaim } from '../workflows/generation-types.js';

/** A model's catalog entry as last seen, with the digest the debit checks it against (null: no active model). */
interface QuotedEntry {
  /** md5 of the stored definition, as admit_generation() and claimSubmit compute it. */
  digest: string | null;
  entry: CatalogEntry | null;
}

/**
 * The catalog entry each model had at its last debit in this process. Catalog changes are
 * rare, so the price is quoted from here and admit_generation() confirms, under the account's
 * lock, that the entry is still the model's; if not, it hands over the current one to quote again.
 */
const lastQuoted = new Map<string, QuotedEntry>();

/**
 * The catalog entry a submission builds the provider's job from: the one the debit last quoted
 * the model from while the stored definition is still that one (`quoted`, whose digest the claim
 * was asked about: no second read or parse), else the stored definition the claim returned.
 */
export function entryToSubmit(
  model: string,
  stored: { digest: string | null; definition?: unknown },
  quoted: QuotedEntry | undefined,
): CatalogEntry | null {
  if (quoted && stored.digest !== null && stored.digest === quoted.digest) return quoted.entry;
  return catalogEntryOf(model, stored.definition);
}

/** The entry this process last quoted `model` from, if any (see entryToSubmit). */
export function lastQuotedEntry(model: string): QuotedEntry | undefined {
  return lastQuoted.get(model);
}

/**
 * The debit, settled in PostgreSQL (the workflow's `debit` activity; the front door's admission, which
 * asks for it through the `admit` update, is src/generations/admission's admitGeneration): the
 * concurrency slot, the price quote from the catalog, and the credits taken (subscription credits
 * first) with its ledger row and the projection row, decided atomically by the SQL function
 * admit_generation() (migrations 0007 and 0012; the name predates the word), usually in one round trip. A second
 * call for the same generation returns what the first decided. With a key claim, the decision
 * that claims the key records it; a record of another generation held past `key.at` answers instead.
 */
export async function settleDebit(
  db: CommonQueryMethods,
  start: GenerationStart,
  concurrencyLimit: number,
  key: KeyClaim | null = null,
  /** Told of a debit or a refusal this call decided (a replay of an earlier decision counts nothing). */
  metrics: GenerationMetrics = noGenerationMetrics,
): Promise<DebitOutcome> {
  // The generation's row, as admit_generation() inserts it when accepted and recordRefusal when not.
  const record: DebitRecord = {
    id: start.generationId,
    account_id: start.accountId,
    api_key_id: start.apiKeyId,
    workflow_id: start.workflowId,
    model: start.model,
    media_type: start.mediaType,
    input: start.input,
    fingerprint: start.fingerprint,
    idempotency_key: start.idempotencyKey,
    provider_token: `tok_${start.generationId}`,
    input_prefix: start.inputPrefix,
    created_at: start.createdAt,
    batch_id: start.batch?.batchId ?? null,
    custom_id: start.batch?.customId ?? null,
    cancel_after: start.cancelAfter ?? null,
  };
  const unknown: QuotedEntry = { digest: null, entry: null };
  let quoted = lastQuoted.get(start.model) ?? unknown;
  // Quoting from this process's memory rather than from the entry admit_generation() just handed back.
  let remembered = quoted !== unknown;
  // A few rounds at most: a requote when the catalog changed, a replay when another attempt decided first.
  for (let round = 1; round <= 4; round++) {
    let price: number | null;
    try {
      price = quoted.entry ? quotePrice(quoted.entry, resolveOptions(quoted.entry, start.input)) : null;
    } catch (error) {
      // The entry this process last saw cannot price the request (a price added since, say): ask for
      // the current one. The current one failing is the catalog's fault, and retried as such.
      if (!remembered) throw error;
      lastQuoted.delete(start.model);
      [quoted, remembered] = [unknown, false];
      continue;
    }
    const decision = await decideDebit(db, record, { price, digest: quoted.digest }, concurrencyLimit, key);
    let refusal: GenerationError;
    switch (decision.outcome) {
      case 'key_held':
        return {
          outcome: 'key_held',
          holder: {
            generationId: decision.generation_id,
            fingerprint: decision.fingerprint,
            keyHeldUntil: new Date(decision.held_until).toISOString(),
            admission:
              decision.status === 'rejected' && decision.error
                ? { outcome: 'rejected', error: decision.error, claimsKey: claimsKey(decision.error) }
                : { outcome: 'accepted', credits: decision.credits },
          },
        };
      case 'existing':
        return decision.status === 'rejected' && decision.error
          ? { outcome: 'rejected', error: decision.error, claimsKey: claimsKey(decision.error) }
          : { outcome: 'accepted', credits: decision.credits };
      case 'accepted':
        metrics.admitted(start.model, decision.credits);
        return { outcome: 'accepted', credits: decision.credits };
      case 'requote':
        quoted = { digest: decision.digest, entry: catalogEntryOf(start.model, decision.definition) };
        remembered = false;
        lastQuoted.set(start.model, quoted);
        continue;
      case 'concurrency_limit':
        refusal = debitRefusals.concurrencyLimit(concurrencyLimit);
        break;
      case 'unavailable':
        refusal = debitRefusals.unavailable(start.model);
        break;
      case 'insufficient_credits':
        // admit_generation() compares only a quoted price with the balance (no price: unavailable).
        refusal = debitRefusals.insufficientCredits(price!, decision.available);
        break;
      case 'batch_ended':
        // Its batch ended first: nothing is recorded (no generation, no debit), and the batch's
        // workflow ends the line with its others, `canceled` or `expired` (migration 0036).
        return { outcome: 'rejected', error: debitRefusals.batchEnded(decision.state), claimsKey: false };
      case 'model_not_allowed':
        refusal = debitRefusals.modelNotAllowed(start.model, decision.models);
        break;
      case 'key_spend_limit':
        refusal = debitRefusals.keySpendLimit(price!, {
          spendLimit: decision.spend_limit,
          limitReset: decision.limit_reset,
          remaining: decision.remaining,
          resetsAt: decision.resets_at === null ? null : new Date(decision.resets_at).toISOString(),
        });
        break;
    }
    // Recorded (listed, named by x-request-id) unless another attempt wrote the row first: then its decision stands.
    if (await recordRefusal(db, record, refusal, claimsKey(refusal) ? key : null)) {
      metrics.rejected(start.model, refusal.code);
      return { outcome: 'rejected', error: refusal, claimsKey: claimsKey(refusal) };
    }
  }
  throw new Error(
    `the debit of ${start.generationId} did not settle (the catalog entry of ${start.model} kept changing)`,
  );
}

/**
 * Whether a refusal holds the Idempotency-Key (a retry with it gets the same answer): the two
 * 402s, the balance's and the key's limit. A retry after the concurrency limit, or after a model
 * became unavailable or was allowed to the key, is a new request.
 */
function claimsKey(error: GenerationError): boolean {
  return error.code === 'insufficient_credits' || error.code === 'key_spend_limit_exceeded';
}
