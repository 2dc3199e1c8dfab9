import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { GenerationError } from '../vocabulary/generation.js';

/**
 * Handing a generation to its provider, once: the claim a submit attempt holds, the mark that a
 * create may have left, the provider's job recorded, and the review mark when nobody can tell
 * whether the provider has the job. Every write is idempotent on the generation id.
 *
 * The claim belongs to one attempt (`attempt`, random per attempt): only its holder may free it,
 * send under it or say its create was answered, so that a late statement from an attempt that was
 * abandoned (a POST deadline, a timed-out activity on a live worker, a worker that came back after
 * a database restart) can neither free a claim another attempt holds nor send a second create.
 * An attempt takes the claim over only when the holder's window has lapsed: before it prepares
 * (the first claim) and from the moment each create is sent (markCreateSent), longer than any
 * adapter's create deadline.
 */

const claimRow = z.object({
  provider_job_id: z.string().nullable(),
  provider_token: z.string().nullable(),
  /** This attempt holds the claim now (took it first, or took it over once the window lapsed). */
  mine: z.boolean(),
  /** An earlier attempt may have sent a create: the provider must be asked before sending again. */
  sent: z.boolean(),
  /** Held by another attempt whose window is open (preparing, or its create awaiting its answer). */
  awaiting_answer: z.boolean(),
  refunded: z.boolean(),
  /** The plan position the claim covers now (see 0019): an attempt for an earlier one is stale. */
  route_position: z.number(),
  digest: z.string().nullable(),
  definition: z.unknown(),
});
export type SubmitClaim = z.infer<typeof claimRow>;

/**
 * What a submit attempt needs, in one round trip: the provider job already recorded (if any), the
 * provider token, whether the attempt now holds the claim and whether an earlier create may have
 * left, and the model's stored definition with its digest (md5, as admit_generation() computes it).
 * The definition is left out (null) when its digest is `knownDigest`: the caller holds that one.
 * A claim taken before claims had holders (submit_claim null) reads as sent.
 */
export async function claimSubmit(
  db: CommonQueryMethods,
  generationId: string,
  attempt: string,
  knownDigest: string | null,
  /** How long other attempts leave the claim to this one while it prepares its create. */
  windowMs: number,
  /** The plan position this attempt submits to: the claim is taken only while it is the current one. */
  position = 0,
): Promise<SubmitClaim> {
  return db.one(sql.type(claimRow)`
    WITH before AS (
      SELECT id, model, provider_job_id, submit_attempted_at, submit_claim, submit_sent_at, submit_awaiting_until, route_position,
        submit_attempted_at IS NULL AS free,
        coalesce(submit_awaiting_until > now(), false) AS held
      FROM generations WHERE id = ${generationId} FOR UPDATE
    ), taking AS (
      SELECT before.*, provider_job_id IS NULL AND (free OR NOT held) AND route_position = ${position} AS takes FROM before
    )
    UPDATE generations g SET
      -- Only the taker marks the row attempted: a late attempt for a route already ended (0019) must
      -- not leave a mark without a holder, which reads as a create that may have left.
      submit_attempted_at = CASE WHEN t.takes THEN coalesce(t.submit_attempted_at, now()) ELSE t.submit_attempted_at END,
      submit_claim = CASE WHEN t.takes THEN ${attempt} ELSE t.submit_claim END,
      submit_awaiting_until = CASE WHEN t.takes
        THEN now() + make_interval(secs => ${windowMs / 1000}) ELSE t.submit_awaiting_until END
    FROM taking t LEFT JOIN (SELECT id, definition, md5(definition::text) AS digest FROM models) m ON m.id = t.model
    WHERE g.id = t.id
    RETURNING g.provider_job_id, g.provider_token, t.takes AS mine,
      NOT t.free AND (t.submit_sent_at IS NOT NULL OR t.submit_claim IS NULL) AS sent,
      NOT t.takes AND t.held AS awaiting_answer,
      g.credits_refunded AS refunded, g.route_position, m.digest,
      CASE WHEN m.digest = ${knownDigest} THEN NULL ELSE m.definition END AS definition`);
}

const markCreateSentRow = z.object({ id: z.string() });

/**
 * The create is about to leave: recorded as possibly sent, and other attempts leave the claim alone
 * for `windowMs` from now (the window starts at the send, however long preparing took). False when
 * this attempt no longer holds the claim, or the generation no longer waits for a job (recorded,
 * in review, ended): then nothing may be sent.
 */
export async function markCreateSent(
  db: CommonQueryMethods,
  generationId: string,
  attempt: string,
  windowMs: number,
  /** The provider of the route the create goes to: the generation's `provider` from now. */
  provider: string | null = null,
): Promise<boolean> {
  const row = await db.maybeOne(sql.type(markCreateSentRow)`
    UPDATE generations SET submit_sent_at = now(), provider = coalesce(${provider}, provider),
      submit_awaiting_until = now() + make_interval(secs => ${windowMs / 1000})
    WHERE id = ${generationId} AND submit_claim = ${attempt} AND provider_job_id IS NULL
      AND status = 'queued' AND NOT needs_review AND NOT credits_refunded
    RETURNING id`);
  return row !== null;
}

/**
 * The holder is still at work (preparing, or its create not yet answered): other attempts leave the
 * claim alone for `windowMs` more. A claim no longer held, or already answered, is left as it is.
 */
export async function keepSubmitClaim(
  db: CommonQueryMethods,
  generationId: string,
  attempt: string,
  windowMs: number,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET submit_awaiting_until = now() + make_interval(secs => ${windowMs / 1000})
    WHERE id = ${generationId} AND submit_claim = ${attempt} AND submit_awaiting_until IS NOT NULL
      AND provider_job_id IS NULL`);
}

/**
 * Nothing was created after all (nothing left us, or the provider refused the create): the claim
 * is freed and the next attempt sends as a first one, and the generation's in-flight place
 * (provider_slots) is given back with it, in the same statement. Only the holder frees its own
 * claim, and so the place: an attempt whose claim was taken over (its window lapsed) leaves both to
 * the attempt that holds the claim now, whose create may be at the provider.
 */
export async function releaseSubmitClaim(
  db: CommonQueryMethods,
  generationId: string,
  attempt: string,
): Promise<void> {
  await db.query(sql.unsafe`
    WITH freed AS (
      UPDATE generations SET submit_attempted_at = NULL, submit_claim = NULL, submit_sent_at = NULL,
        submit_awaiting_until = NULL
      WHERE id = ${generationId} AND submit_claim = ${attempt} AND provider_job_id IS NULL
      RETURNING id
    )
    DELETE FROM provider_slots WHERE generation_id IN (SELECT id FROM freed)`);
}

/**
 * This attempt is done with the claim without knowing what the provider has (its create's answer
 * was lost, or it could not ask): other attempts need not wait for it any more. The claim, and
 * the mark that a create may have left, stay.
 */
export async function markCreateAnswered(
  db: CommonQueryMethods,
  generationId: string,
  attempt: string,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET submit_awaiting_until = NULL WHERE id = ${generationId} AND submit_claim = ${attempt}`);
}

const submissionStateRow = z.object({ provider_job_id: z.string().nullable(), sent: z.boolean() });

/** Where submission stands: the provider's job, if recorded, and whether a create may have reached the provider. */
export async function submissionState(
  db: CommonQueryMethods,
  generationId: string,
): Promise<{ jobId: string | null; mayHaveReachedProvider: boolean }> {
  const row = await db.one(sql.type(submissionStateRow)`
    SELECT provider_job_id, ${mayHaveSent} AS sent FROM generations WHERE id = ${generationId}`);
  return { jobId: row.provider_job_id, mayHaveReachedProvider: row.sent };
}

/** Whether a create may have left for the provider (a claim from before holders counts as sent). */
export const mayHaveSent = sql.fragment`(submit_sent_at IS NOT NULL OR (submit_attempted_at IS NOT NULL AND submit_claim IS NULL))`;

/**
 * The provider has the job: its id is recorded (once; a recorded one is never replaced; true when
 * this call recorded it, and the route's attempt with it, for the metrics to count once). What the
 * generation shows is left alone: a generation sent to review meanwhile stays in review, for
 * support to resolve (with this job id at hand); its workflow waits for that.
 *
 * With a route, only while `attempt` holds the submit claim and the claim is still on that route's
 * plan position: a late attempt whose claim was taken over, or whose route was left (the workflow has
 * moved on to the next), records nothing over what the claim's holder does.
 */
export async function recordSubmittedJob(
  db: CommonQueryMethods,
  generationId: string,
  jobId: string,
  /** The route that took it: recorded as its attempt (route_attempts), and as the generation's provider. */
  route?: { position: number; route: number; provider: string },
  /** The submit attempt that sent the create (its claim, see claimSubmit). */
  attempt?: string,
): Promise<boolean> {
  if (!route) {
    const updated = await db.query(sql.unsafe`
      UPDATE generations SET provider_job_id = ${jobId}, submit_awaiting_until = NULL, updated_at = now()
      WHERE id = ${generationId} AND provider_job_id IS NULL`);
    return updated.rowCount > 0;
  }
  const recorded = await db.query(sql.unsafe`
    WITH recorded AS (
      UPDATE generations SET provider_job_id = ${jobId}, provider = ${route.provider},
        submit_awaiting_until = NULL, updated_at = now()
      WHERE id = ${generationId} AND provider_job_id IS NULL AND route_position = ${route.position}
        ${attempt === undefined ? sql.fragment`` : sql.fragment`AND submit_claim = ${attempt}`}
      RETURNING id
    )
    INSERT INTO route_attempts (generation_id, position, route, provider, provider_job_id, outcome)
    SELECT id, ${route.position}, ${route.route}, ${route.provider}, ${jobId}, 'accepted' FROM recorded
    ON CONFLICT (generation_id, position) DO NOTHING`);
  return recorded.rowCount > 0;
}

/**
 * Support resolved an uncertain submission with the provider's job id: the generation is queued
 * again, out of review, and its workflow goes on to wait for the job.
 */
export async function resumeWithProviderJob(
  db: CommonQueryMethods,
  generationId: string,
  jobId: string,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET provider_job_id = ${jobId}, submit_awaiting_until = NULL, needs_review = false, status = 'queued', error = NULL, updated_at = now()
    WHERE id = ${generationId} AND (status = 'queued' OR needs_review) AND NOT credits_refunded`);
}

const markNeedsReviewRow = z.object({ model: z.string(), changed: z.boolean() });

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
  const sent = await db.maybeOne(sql.type(markNeedsReviewRow)`
    UPDATE generations g SET status = 'failed', needs_review = true, error = ${sql.jsonb(error as never)}, updated_at = now()
    FROM (SELECT id, status, needs_review FROM generations WHERE id = ${generationId} FOR UPDATE) before
    WHERE g.id = before.id AND NOT g.credits_refunded AND g.status <> 'succeeded'
    RETURNING g.model, (before.status <> 'failed' OR NOT before.needs_review) AS changed`);
  return sent?.changed ? sent.model : null;
}
