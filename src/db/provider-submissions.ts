import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { GenerationError } from '../generation.js';

/**
 * Handing a generation to its provider, once: the claim a submit attempt takes, the provider's
 * job recorded, and the review mark when nobody can tell whether the provider has the job. Every
 * write is idempotent on the generation id.
 */

/**
 * What a submit attempt needs, in one round trip: the provider job already recorded (if any), the
 * provider token, whether this is the first attempt to submit (claimed now: false means an earlier
 * attempt may already have reached the provider), and the model's stored definition with its
 * digest (md5, as admit_generation() computes it). The definition is left out (null) when its
 * digest is `knownDigest`: the caller holds that one already.
 */
export async function claimSubmit(
  db: CommonQueryMethods,
  generationId: string,
  knownDigest: string | null,
  /** A first claim is about to send: later attempts wait this long for its answer (see markCreateSent). */
  awaitAnswerMs = 0,
) {
  return db.one(sql.type(
    z.object({
      provider_job_id: z.string().nullable(),
      provider_token: z.string().nullable(),
      first: z.boolean(),
      refunded: z.boolean(),
      digest: z.string().nullable(),
      definition: z.unknown(),
      awaiting_answer: z.boolean(),
    }),
  )`
    WITH before AS (SELECT id, model, submit_attempted_at, submit_awaiting_until FROM generations WHERE id = ${generationId} FOR UPDATE)
    UPDATE generations g SET submit_attempted_at = coalesce(before.submit_attempted_at, now()),
      submit_awaiting_until = CASE WHEN before.submit_attempted_at IS NULL
        THEN now() + make_interval(secs => ${awaitAnswerMs / 1000}) ELSE before.submit_awaiting_until END
    FROM before LEFT JOIN (SELECT id, definition, md5(definition::text) AS digest FROM models) m ON m.id = before.model
    WHERE g.id = before.id
    RETURNING g.provider_job_id, g.provider_token, before.submit_attempted_at IS NULL AS first,
      g.credits_refunded AS refunded, m.digest,
      coalesce(before.submit_awaiting_until > now(), false) AS awaiting_answer,
      CASE WHEN m.digest = ${knownDigest} THEN NULL ELSE m.definition END AS definition`);
}

/** Nothing reached the provider after all (it refused the connection, say): the next attempt is a first one again. */
export async function releaseSubmitClaim(db: CommonQueryMethods, generationId: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET submit_attempted_at = NULL, submit_awaiting_until = NULL
    WHERE id = ${generationId} AND provider_job_id IS NULL`);
}

/**
 * The create is about to leave for the provider: until its answer comes back (or `withinMs` has
 * passed), later attempts wait for it rather than take its silence for a lost answer.
 */
export async function markCreateSent(
  db: CommonQueryMethods,
  generationId: string,
  withinMs: number,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET submit_awaiting_until = now() + make_interval(secs => ${withinMs / 1000})
    WHERE id = ${generationId}`);
}

/** The create's answer came back (whatever it said): no attempt need wait for it any more. */
export async function markCreateAnswered(db: CommonQueryMethods, generationId: string): Promise<void> {
  await db.query(sql.unsafe`UPDATE generations SET submit_awaiting_until = NULL WHERE id = ${generationId}`);
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
    UPDATE generations SET provider_job_id = ${jobId}, submit_awaiting_until = NULL, needs_review = false, status = 'queued', error = NULL, updated_at = now()
    WHERE id = ${generationId} AND status IN ('queued', 'failed') AND NOT credits_refunded`);
}

/**
 * Listed as failed and needing review: the provider may or may not have the job. Nothing is refunded.
 * Returns the generation's model when this call sent it to review (null: it was in review already,
 * or refunded).
 */
export async function markNeedsReview(
  db: CommonQueryMethods,
  generationId: string,
  error: GenerationError,
): Promise<string | null> {
  const sent = await db.maybeOne(sql.type(z.object({ model: z.string(), changed: z.boolean() }))`
    UPDATE generations g SET status = 'failed', needs_review = true, error = ${sql.jsonb(error as never)}, updated_at = now()
    FROM (SELECT id, status, needs_review FROM generations WHERE id = ${generationId} FOR UPDATE) before
    WHERE g.id = before.id AND NOT g.credits_refunded
    RETURNING g.model, (before.status <> 'failed' OR NOT before.needs_review) AS changed`);
  return sent?.changed ? sent.model : null;
}
