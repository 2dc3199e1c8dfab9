import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { quotePrice, resolveOptions } from '../catalog/pricing.js';
import { catalogEntryOf, type CatalogEntry } from '../catalog/catalog-entry.js';
import type { GenerationError } from '../generation.js';
import type { Admission, GenerationStart } from '../workflows/generation-types.js';

/**
 * The generations projection and the credit movements tied to it. Every
 * write here is idempotent on the generation id, so an activity retried after
 * a crash, or re-run after a support reset, changes nothing the second time.
 */

export const concurrencyLimitError = (limit: number): GenerationError => ({
  code: 'concurrency_limit_exceeded',
  message: `At most ${limit} generations may be in progress at once; wait for one to finish. Nothing was charged.`,
});

const generationError = z.object({ code: z.string(), message: z.string() });
const admissionDecision = z.discriminatedUnion('outcome', [
  z.object({
    outcome: z.literal('existing'),
    status: z.string(),
    credits: z.number(),
    error: generationError.nullable(),
  }),
  z.object({ outcome: z.literal('concurrency_limit') }),
  z.object({ outcome: z.literal('requote'), definition: z.unknown(), digest: z.string().nullable() }),
  z.object({ outcome: z.literal('unavailable') }),
  z.object({ outcome: z.literal('insufficient_credits'), available: z.number() }),
  z.object({ outcome: z.literal('accepted'), credits: z.number() }),
]);

/** A model's catalog entry as last seen, with the digest admission checks it against (null: no active model). */
interface Quotable {
  digest: string | null;
  entry: CatalogEntry | null;
}
/**
 * The catalog entry each model had at its last admission in this process. Catalog changes are
 * rare, so the price is quoted from here and admit_generation() confirms, under the account's
 * lock, that the entry is still the model's; if not, it hands over the current one to quote again.
 */
const lastQuotable = new Map<string, Quotable>();

/**
 * Admission: the concurrency slot, the price quote from the catalog, and the debit (subscription
 * credits first) with its ledger row and the projection row, decided atomically by the
 * admit_generation() function (migration 0007), usually in one round trip. A second call for
 * the same generation returns what the first decided.
 */
export async function admitGeneration(
  db: CommonQueryMethods,
  start: GenerationStart,
  concurrencyLimit: number,
): Promise<Admission> {
  // The generation's row, as admit_generation() inserts it when accepted and recordRefusal when not.
  const record = sql.jsonb({
    id: start.generationId,
    account_id: start.accountId,
    api_key_id: start.apiKeyId,
    workflow_id: start.workflowId,
    model: start.model,
    media_type: start.mediaType,
    input: start.input as never,
    fingerprint: start.fingerprint,
    idempotency_key: start.idempotencyKey,
    provider_token: `tok_${start.generationId}`,
    input_prefix: start.inputPrefix,
    created_at: start.createdAt,
  });
  const unknown: Quotable = { digest: null, entry: null };
  let quotable = lastQuotable.get(start.model) ?? unknown;
  // Quoting from this process's memory rather than from the entry admit_generation() just handed back.
  let remembered = quotable !== unknown;
  // A few rounds at most: a requote when the catalog changed, a replay when another attempt decided first.
  for (let round = 1; round <= 4; round++) {
    let price: number | null;
    try {
      price = quotable.entry ? quotePrice(quotable.entry, resolveOptions(quotable.entry, start.input)) : null;
    } catch (error) {
      // The entry this process last saw cannot price the request (a price added since, say): ask for
      // the current one. The current one failing is the catalog's fault, and retried as such.
      if (!remembered) throw error;
      lastQuotable.delete(start.model);
      [quotable, remembered] = [unknown, false];
      continue;
    }
    const decision = await db.oneFirst(sql.type(z.object({ decision: admissionDecision }))`
      SELECT admit_generation(${record}, ${price}, ${quotable.digest}, ${concurrencyLimit}) AS decision`);
    let refusal: GenerationError;
    switch (decision.outcome) {
      case 'existing':
        return decision.status === 'rejected' && decision.error
          ? { outcome: 'rejected', error: decision.error, claimsKey: claimsKey(decision.error) }
          : { outcome: 'accepted', credits: decision.credits };
      case 'accepted':
        return { outcome: 'accepted', credits: decision.credits };
      case 'requote':
        quotable = { digest: decision.digest, entry: catalogEntryOf(start.model, decision.definition) };
        remembered = false;
        lastQuotable.set(start.model, quotable);
        continue;
      case 'concurrency_limit':
        refusal = concurrencyLimitError(concurrencyLimit);
        break;
      case 'unavailable':
        refusal = { code: 'invalid_request', message: `Model ${start.model} is not available.` };
        break;
      case 'insufficient_credits':
        refusal = {
          code: 'insufficient_credits',
          message: `This generation costs ${price} credits; the balance is ${decision.available}.`,
        };
        break;
    }
    // Recorded (listed, named by x-request-id) unless another attempt wrote the row first: then its decision stands.
    const recorded = await db.maybeOneFirst(recordRefusal(record, refusal));
    if (recorded) return { outcome: 'rejected', error: refusal, claimsKey: claimsKey(refusal) };
  }
  throw new Error(
    `admission of ${start.generationId} did not settle (the catalog entry of ${start.model} kept changing)`,
  );
}

/**
 * Whether a refusal holds the Idempotency-Key (a retry with it gets the same answer): only
 * insufficient credits. A retry after the concurrency limit, or after a model became
 * unavailable, is a new request.
 */
function claimsKey(error: GenerationError): boolean {
  return error.code === 'insufficient_credits';
}

/** The generation's row, refused; nothing (no id back) when the row exists: another attempt decided first. */
function recordRefusal(record: ReturnType<typeof sql.jsonb>, error: GenerationError) {
  return sql.type(z.object({ id: z.string() }))`
    INSERT INTO generations (id, account_id, api_key_id, workflow_id, status, model, media_type, credits, input, error,
                             fingerprint, idempotency_key, provider_token, input_prefix, created_at)
    SELECT r.id, r.account_id, r.api_key_id, r.workflow_id, 'rejected', r.model, r.media_type, 0, r.input,
           ${sql.jsonb(error as never)}, r.fingerprint, r.idempotency_key, r.provider_token, r.input_prefix, r.created_at
    FROM jsonb_populate_record(NULL::generations, ${record}) r
    ON CONFLICT (id) DO NOTHING RETURNING id`;
}

/** A request rejected before it became a generation (validation): recorded for the list, never changed again. */
export async function recordRejectedRequest(
  db: CommonQueryMethods,
  record: {
    id: string;
    accountId: string;
    apiKeyId: string;
    model: string;
    mediaType: string;
    input: Record<string, unknown> | null;
    error: GenerationError;
  },
): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, credits, input, error, created_at, completed_at)
    VALUES (${record.id}, ${record.accountId}, ${record.apiKeyId}, 'rejected', ${record.model}, ${record.mediaType}, 0,
            ${record.input ? sql.jsonb(record.input as never) : null}, ${sql.jsonb(record.error as never)},
            date_trunc('milliseconds', now()), date_trunc('milliseconds', now()))`);
}

/**
 * What a submit attempt needs, in one round trip: the provider job already
 * recorded (if any), the provider token, the model's definition, and whether
 * this is the first attempt to submit (claimed now: false means an earlier
 * attempt may already have reached the provider).
 */
export async function claimSubmit(db: CommonQueryMethods, generationId: string) {
  return db.one(sql.type(
    z.object({
      provider_job_id: z.string().nullable(),
      provider_token: z.string().nullable(),
      first: z.boolean(),
      refunded: z.boolean(),
      definition: z.unknown(),
    }),
  )`
    WITH before AS (SELECT id, submit_attempted_at FROM generations WHERE id = ${generationId} FOR UPDATE)
    UPDATE generations g SET submit_attempted_at = coalesce(before.submit_attempted_at, now())
    FROM before WHERE g.id = before.id
    RETURNING g.provider_job_id, g.provider_token, before.submit_attempted_at IS NULL AS first,
      g.credits_refunded AS refunded, (SELECT definition FROM models m WHERE m.id = g.model) AS definition`);
}

/** Nothing reached the provider after all (it refused the connection, say): the next attempt is a first one again. */
export async function releaseSubmitClaim(db: CommonQueryMethods, generationId: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET submit_attempted_at = NULL WHERE id = ${generationId} AND provider_job_id IS NULL`);
}

/** Where submission stands: the provider's job, if recorded, and whether a submit may have reached the provider. */
export async function submissionState(
  db: CommonQueryMethods,
  generationId: string,
): Promise<{ jobId: string | null; mayHaveReachedProvider: boolean }> {
  const row = await db.one(sql.type(
    z.object({ provider_job_id: z.string().nullable(), claimed: z.boolean() }),
  )`
    SELECT provider_job_id, submit_attempted_at IS NOT NULL AS claimed FROM generations WHERE id = ${generationId}`);
  return { jobId: row.provider_job_id, mayHaveReachedProvider: row.claimed };
}

export async function recordProviderJob(
  db: CommonQueryMethods,
  generationId: string,
  jobId: string,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET provider_job_id = ${jobId}, needs_review = false, status = 'queued', error = NULL, updated_at = now()
    WHERE id = ${generationId} AND status IN ('queued', 'failed') AND NOT credits_refunded`);
}

/** Listed as failed and needing review: the provider may or may not have the job. Nothing is refunded. */
export async function markNeedsReview(
  db: CommonQueryMethods,
  generationId: string,
  error: GenerationError,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET status = 'failed', needs_review = true, error = ${sql.jsonb(error as never)}, updated_at = now()
    WHERE id = ${generationId} AND NOT credits_refunded`);
}

/** The generation's output folder: `candidate` the first time, the same folder ever after. */
export async function claimOutputPrefix(
  db: CommonQueryMethods,
  generationId: string,
  candidate: string,
): Promise<{ prefix: string; refunded: boolean }> {
  const row = await db.one(sql.type(z.object({ output_prefix: z.string(), credits_refunded: z.boolean() }))`
    UPDATE generations SET output_prefix = COALESCE(output_prefix, ${candidate}) WHERE id = ${generationId}
    RETURNING output_prefix, credits_refunded`);
  return { prefix: row.output_prefix, refunded: row.credits_refunded };
}

export interface StoredOutput {
  url: string;
  width: number;
  height: number;
  contentType: string;
  durationSeconds?: number;
  hasAudio?: boolean;
}

/**
 * Succeeded: output, completed_at, expires_at (retention after storage) and, for images, the
 * account's gallery rows, in one statement. A generation completed before keeps its output and
 * expires_at (a retried or reset persist changes nothing); a refunded one is left alone (null).
 */
export async function completeGeneration(
  db: CommonQueryMethods,
  generationId: string,
  outputs: StoredOutput[],
  retentionMs: number,
): Promise<{ expiresAt: string } | null> {
  const images = outputs.map((o) => ({ url: o.url, width: o.width, height: o.height }));
  const videos = outputs.map((o) => ({
    url: o.url,
    width: o.width,
    height: o.height,
    duration_seconds: o.durationSeconds ?? 0,
    has_audio: o.hasAudio ?? false,
    content_type: o.contentType,
  }));
  // A refunded generation never succeeds: nothing is written, and the caller hears null.
  const expiresAt = await db.maybeOneFirst(sql.type(z.object({ expires_at: z.string().nullable() }))`
    WITH target AS (
      SELECT id, media_type, expires_at FROM generations WHERE id = ${generationId} AND NOT credits_refunded FOR UPDATE
    ), done AS (
      UPDATE generations g SET status = 'succeeded',
        output = CASE WHEN t.media_type = 'video' THEN ${sql.jsonb({ videos })} ELSE ${sql.jsonb({ images })} END,
        error = NULL, needs_review = false, completed_at = now(),
        expires_at = now() + ${sql.interval({ seconds: retentionMs / 1000 })}, updated_at = now()
      FROM target t WHERE g.id = t.id AND t.expires_at IS NULL
      RETURNING g.account_id, g.media_type, g.expires_at
    ), gallery AS (
      INSERT INTO gallery_images (account_id, generation_id, url, width, height)
      SELECT done.account_id, ${generationId}, image.url, image.width, image.height
      FROM done, jsonb_to_recordset(${sql.jsonb(images)}) AS image (url text, width integer, height integer)
      WHERE done.media_type = 'image'
      ON CONFLICT DO NOTHING
    )
    SELECT coalesce((SELECT expires_at FROM done), (SELECT expires_at FROM target)) AS expires_at`);
  return expiresAt ? { expiresAt } : null;
}

/** The storage folders holding a generation's content (outputs and inline inputs). */
export async function contentPrefixes(db: CommonQueryMethods, generationId: string): Promise<string[]> {
  const row = await db.one(sql.type(
    z.object({ output_prefix: z.string().nullable(), input_prefix: z.string().nullable() }),
  )`
    SELECT output_prefix, input_prefix FROM generations WHERE id = ${generationId}`);
  return [row.output_prefix, row.input_prefix].filter((p): p is string => p !== null);
}

/** Content expiry, once the files are gone: input and output null, content_expired; id, status and credits kept. */
export async function expireGeneration(db: CommonQueryMethods, generationId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`
      UPDATE generations SET input = NULL, output = NULL, content_expired = true, updated_at = now() WHERE id = ${generationId}`);
    await tx.query(sql.unsafe`DELETE FROM gallery_images WHERE generation_id = ${generationId}`);
  });
}
