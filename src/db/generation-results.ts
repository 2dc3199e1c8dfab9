import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { mediaTypeOfName } from '../storage/storage.js';

/**
 * A generation's results: its output folder, the success with its outputs (and gallery rows),
 * and content expiry. Every write is idempotent on the generation id, so an activity retried
 * after a crash, or re-run after a support reset, changes nothing the second time.
 */

const claimOutputPrefixRow = z.object({
  output_prefix: z.string(),
  credits_refunded: z.boolean(),
  succeeded: z.boolean(),
  expires_at: z.string().nullable(),
  output: z.unknown(),
});

/**
 * The generation's output folder (`candidate` the first time, the same folder ever after), and
 * what persisting needs to know before it copies anything: whether the generation was refunded,
 * and, when an earlier run of the step already completed it, what it stored (a re-run stops there).
 */
export async function claimOutputPrefix(
  db: CommonQueryMethods,
  generationId: string,
  candidate: string,
): Promise<{
  prefix: string;
  refunded: boolean;
  completed: { expiresAt: string; outputs: StoredOutput[] } | null;
}> {
  const row = await db.one(sql.type(claimOutputPrefixRow)`
    UPDATE generations SET output_prefix = COALESCE(output_prefix, ${candidate}) WHERE id = ${generationId}
    RETURNING output_prefix, credits_refunded, status = 'succeeded' AS succeeded, expires_at, output`);
  const completed =
    row.succeeded && row.expires_at
      ? { expiresAt: row.expires_at, outputs: storedOutputs(row.output) }
      : null;
  return { prefix: row.output_prefix, refunded: row.credits_refunded, completed };
}

const claimInputPrefixRow = z.object({ input_prefix: z.string(), credits_refunded: z.boolean() });

/**
 * The generation's input folder, where the customer's reference images are stored once fetched:
 * the one the API stored inline images in, else `candidate` the first time and the same ever
 * after. Recorded before any file is written, so whatever is stored there is deleted with the
 * generation's inputs (when it ends without success, or at content expiry). `refunded`: nothing
 * more may be stored for it.
 */
export async function claimInputPrefix(
  db: CommonQueryMethods,
  generationId: string,
  candidate: string,
): Promise<{ prefix: string; refunded: boolean }> {
  const row = await db.one(sql.type(claimInputPrefixRow)`
    UPDATE generations SET input_prefix = COALESCE(input_prefix, ${candidate}) WHERE id = ${generationId}
    RETURNING input_prefix, credits_refunded`);
  return { prefix: row.input_prefix, refunded: row.credits_refunded };
}

/** The outputs a completed generation's record holds (empty once its content expired). */
function storedOutputs(output: unknown): StoredOutput[] {
  const record = (output ?? {}) as { images?: StoredImage[]; videos?: StoredVideo[] };
  return [
    ...(record.images ?? []).map((i) => ({ ...i, contentType: mediaTypeOfName(i.url) })),
    ...(record.videos ?? []).map((v) => ({
      url: v.url,
      width: v.width,
      height: v.height,
      contentType: v.content_type,
      durationSeconds: v.duration_seconds,
      hasAudio: v.has_audio,
    })),
  ];
}

interface StoredImage {
  url: string;
  width: number;
  height: number;
}

interface StoredVideo extends StoredImage {
  duration_seconds: number;
  has_audio: boolean;
  content_type: string;
}

export interface StoredOutput {
  url: string;
  width: number;
  height: number;
  contentType: string;
  durationSeconds?: number;
  hasAudio?: boolean;
}

const completeGenerationRow = z.object({ expires_at: z.string().nullable(), completed_now: z.boolean() });

/**
 * Succeeded: output, completed_at, expires_at (retention after storage) and, for images, the
 * account's gallery rows, in one statement. A generation completed before keeps its output and
 * expires_at (a retried or reset persist changes nothing, and `completedNow` is false); one that
 * ended otherwise (refunded, failed, in review) is left alone (null): only a queued generation succeeds.
 */
export async function completeGeneration(
  db: CommonQueryMethods,
  generationId: string,
  outputs: StoredOutput[],
  retentionMs: number,
): Promise<{ expiresAt: string; completedNow: boolean } | null> {
  const images = outputs.map((o) => ({ url: o.url, width: o.width, height: o.height }));
  const videos = outputs.map((o) => ({
    url: o.url,
    width: o.width,
    height: o.height,
    duration_seconds: o.durationSeconds ?? 0,
    has_audio: o.hasAudio ?? false,
    content_type: o.contentType,
  }));
  // A refunded or failed generation never succeeds: nothing is written, and the caller hears null.
  const row = await db.one(sql.type(completeGenerationRow)`
    WITH target AS (
      SELECT id, media_type, expires_at FROM generations
      WHERE id = ${generationId} AND NOT credits_refunded AND status IN ('queued', 'succeeded') FOR UPDATE
    ), done AS (
      UPDATE generations g SET status = 'succeeded',
        output = CASE WHEN t.media_type = 'video' THEN ${sql.jsonb({ videos })} ELSE ${sql.jsonb({ images })} END,
        error = NULL, needs_review = false, completed_at = now(),
        expires_at = now() + ${sql.interval({ seconds: retentionMs / 1000 })}, updated_at = now()
      FROM target t WHERE g.id = t.id AND g.status = 'queued'
      RETURNING g.account_id, g.media_type, g.expires_at
    ), gallery AS (
      INSERT INTO gallery_images (account_id, generation_id, url, width, height)
      SELECT done.account_id, ${generationId}, image.url, image.width, image.height
      FROM done, jsonb_to_recordset(${sql.jsonb(images)}) AS image (url text, width integer, height integer)
      WHERE done.media_type = 'image'
      ON CONFLICT DO NOTHING
    )
    SELECT coalesce((SELECT expires_at FROM done), (SELECT expires_at FROM target)) AS expires_at,
      EXISTS (SELECT 1 FROM done) AS completed_now`);
  return row.expires_at ? { expiresAt: row.expires_at, completedNow: row.completed_now } : null;
}

const contentPrefixesRow = z.object({
  output_prefix: z.string().nullable(),
  input_prefix: z.string().nullable(),
});

/** The storage folders holding a generation's content (outputs and inline inputs). */
export async function contentPrefixes(db: CommonQueryMethods, generationId: string): Promise<string[]> {
  const row = await db.one(sql.type(contentPrefixesRow)`
    SELECT output_prefix, input_prefix FROM generations WHERE id = ${generationId}`);
  return [row.output_prefix, row.input_prefix].filter((p): p is string => p !== null);
}

const discardablePrefixesRow = z.object({
  output_prefix: z.string().nullable(),
  input_prefix: z.string().nullable(),
});

/**
 * The storage folders of a generation that ended without success (failed, refunded, rejected; not
 * in review, whose job may still succeed): its files are deleted at once. Null when it succeeded,
 * may still succeed, or its content is gone already: nothing of it may be deleted then.
 */
export async function discardablePrefixes(
  db: CommonQueryMethods,
  generationId: string,
): Promise<string[] | null> {
  const row = await db.maybeOne(sql.type(discardablePrefixesRow)`
    SELECT output_prefix, input_prefix FROM generations
    WHERE id = ${generationId} AND (status = 'rejected' OR (status = 'failed' AND NOT needs_review))
      AND NOT content_expired`);
  return row && [row.output_prefix, row.input_prefix].filter((p): p is string => p !== null);
}

/**
 * The content of a generation that ended without success, once its files are gone: input and output
 * null, content_expired, as at expiry. Never touches a generation that succeeded or is in review.
 */
export async function discardGeneration(db: CommonQueryMethods, generationId: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE generations SET input = NULL, output = NULL, content_expired = true, updated_at = now()
    WHERE id = ${generationId} AND (status = 'rejected' OR (status = 'failed' AND NOT needs_review))`);
}

/** Content expiry, once the files are gone: input and output null, content_expired; id, status and credits kept. */
export async function expireGeneration(db: CommonQueryMethods, generationId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`
      UPDATE generations SET input = NULL, output = NULL, content_expired = true, updated_at = now() WHERE id = ${generationId}`);
    await tx.query(sql.unsafe`DELETE FROM gallery_images WHERE generation_id = ${generationId}`);
  });
}

const galleryImageUrlsRow = z.object({ url: z.string() });

/** The URLs of a generation's images in the gallery (none once its content expired, or for a video). */
export async function galleryImageUrls(
  db: CommonQueryMethods,
  generationId: string,
): Promise<readonly string[]> {
  return db.anyFirst(sql.type(galleryImageUrlsRow)`
    SELECT url FROM gallery_images WHERE generation_id = ${generationId} ORDER BY id`);
}
