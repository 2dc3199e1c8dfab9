import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { GenerationError, KeyClaim } from '../vocabulary/generation.js';
import { generationErrorColumn } from './generation-reads.js';
import { keyLimitResets } from './key-limits.js';

/**
 * The generation's row as the debit writes it, accepted or refused: columns of `generations`.
 * The debit's decisions (the quote, the wording of a refusal) are the caller's; see
 * src/activities/debit.ts.
 */
export interface DebitRecord {
  id: string;
  account_id: string;
  api_key_id: string;
  workflow_id: string;
  model: string;
  media_type: string;
  input: Record<string, unknown>;
  fingerprint: string;
  idempotency_key: string | null;
  provider_token: string;
  input_prefix: string | null;
  created_at: string;
  /** A batch line's batch and custom_id (migration 0026); null otherwise. */
  batch_id: string | null;
  custom_id: string | null;
  /** Its Cancel-After deadline, ISO (migration 0028); null without one. */
  cancel_after: string | null;
}

const debitDecision = z.discriminatedUnion('outcome', [
  z.object({
    outcome: z.literal('existing'),
    status: z.string(),
    credits: z.number(),
    error: generationErrorColumn.nullable(),
  }),
  z.object({ outcome: z.literal('concurrency_limit') }),
  z.object({ outcome: z.literal('requote'), definition: z.unknown(), digest: z.string().nullable() }),
  z.object({ outcome: z.literal('unavailable') }),
  z.object({ outcome: z.literal('insufficient_credits'), available: z.number() }),
  z.object({ outcome: z.literal('model_not_allowed'), models: z.array(z.string()) }),
  z.object({
    outcome: z.literal('key_spend_limit'),
    spend_limit: z.number(),
    limit_reset: z.enum(keyLimitResets),
    remaining: z.number(),
    resets_at: z.string().nullable(),
  }),
  z.object({ outcome: z.literal('accepted'), credits: z.number() }),
  z.object({ outcome: z.literal('batch_ended'), state: z.enum(['canceled', 'expired']) }),
  z.object({
    outcome: z.literal('key_held'),
    generation_id: z.string(),
    fingerprint: z.string(),
    held_until: z.string(),
    status: z.string(),
    credits: z.number(),
    error: generationErrorColumn.nullable(),
  }),
]);
/** What admit_generation() decided (its outcomes are listed in migrations 0007, 0012, 0034 and 0036). */
type DebitDecision = z.infer<typeof debitDecision>;

const decideDebitRow = z.object({ decision: debitDecision });

/**
 * One call to admit_generation() (migrations 0007 and 0012): under the account's lock, the key's
 * record when a claim is given, the concurrency slot, the check that `quote` was made from the
 * model's current catalog entry, the balance, and the debit with its ledger row, the generation's
 * row and the key's record. A refusal writes nothing.
 */
export async function decideDebit(
  db: CommonQueryMethods,
  record: DebitRecord,
  quote: { price: number | null; digest: string | null },
  concurrencyLimit: number,
  key: KeyClaim | null,
): Promise<DebitDecision> {
  const claim = key ? sql.jsonb({ held_until: key.heldUntil, at: key.at }) : null;
  return db.oneFirst(sql.type(decideDebitRow)`
    SELECT admit_generation(${jsonbOf(record)}, ${quote.price}, ${quote.digest}, ${concurrencyLimit}, ${claim}::jsonb) AS decision`);
}

const recordRefusalRow = z.object({ id: z.string() });

/**
 * Writes the generation's row, refused, and with `key` (a refusal that claims it) the key's
 * record; false when the row exists: another attempt decided first. A record another generation
 * holds past `key.at` is left alone (the debit checked there was none; this is the belt to its braces).
 */
export async function recordRefusal(
  db: CommonQueryMethods,
  record: DebitRecord,
  error: GenerationError,
  key: KeyClaim | null,
): Promise<boolean> {
  const id = await db.maybeOneFirst(sql.type(recordRefusalRow)`
    WITH refused AS (
      INSERT INTO generations (id, account_id, api_key_id, workflow_id, status, model, media_type, credits, input, error,
                               fingerprint, idempotency_key, provider_token, input_prefix, created_at, batch_id, custom_id,
                               cancel_after)
      SELECT r.id, r.account_id, r.api_key_id, r.workflow_id, 'rejected', r.model, r.media_type, 0, r.input,
             ${sql.jsonb(error as never)}, r.fingerprint, r.idempotency_key, r.provider_token, r.input_prefix, r.created_at,
             r.batch_id, r.custom_id, r.cancel_after
      FROM jsonb_populate_record(NULL::generations, ${jsonbOf(record)}) r
      ON CONFLICT (id) DO NOTHING RETURNING id, api_key_id, idempotency_key, fingerprint
    ), claimed AS (
      INSERT INTO idempotency_keys AS k (api_key_id, idempotency_key, generation_id, fingerprint, held_until)
      SELECT api_key_id, idempotency_key, id, fingerprint, ${key?.heldUntil ?? null}::timestamptz
      FROM refused WHERE ${key !== null} AND idempotency_key IS NOT NULL
      ON CONFLICT (api_key_id, idempotency_key) DO UPDATE
        SET generation_id = EXCLUDED.generation_id, fingerprint = EXCLUDED.fingerprint,
            held_until = EXCLUDED.held_until, created_at = now()
        WHERE k.held_until <= ${key?.at ?? null}::timestamptz OR k.generation_id = EXCLUDED.generation_id
    )
    SELECT id FROM refused`);
  return id !== null;
}

/**
 * Records a request whose debit did not answer the front door in time as refused with `error`,
 * unless the debit wrote the generation's row first. It takes the account's lock, as
 * admit_generation() does, so exactly one of the two writes the row: when this refusal does (true), the debit finds
 * it as its own earlier decision ('existing') and debits nothing.
 */
export async function recordUnanswered(
  db: CommonQueryMethods,
  request: {
    id: string;
    accountId: string;
    apiKeyId: string;
    workflowId: string;
    model: string;
    mediaType: string;
    fingerprint: string;
    createdAt: string;
  },
  error: GenerationError,
): Promise<boolean> {
  const id = await db.maybeOneFirst(sql.type(recordRefusalRow)`
    WITH account AS (SELECT id FROM accounts WHERE id = ${request.accountId} FOR NO KEY UPDATE)
    INSERT INTO generations (id, account_id, api_key_id, workflow_id, status, model, media_type, credits, error,
                             fingerprint, created_at, completed_at)
    SELECT ${request.id}, account.id, ${request.apiKeyId}, ${request.workflowId}, 'rejected', ${request.model},
           ${request.mediaType}, 0, ${sql.jsonb(error as never)}, ${request.fingerprint}, ${request.createdAt},
           date_trunc('milliseconds', now())
    FROM account
    ON CONFLICT (id) DO NOTHING RETURNING id`);
  return id !== null;
}

const jsonbOf = (record: DebitRecord) => sql.jsonb({ ...record, input: record.input as never });
