import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * A generation's results: its output folder, the success with its outputs (and gallery rows),
 * and content expiry. Every write is idempotent on the generation id, so an activity retried
 * after a crash, or re-run after a support reset, changes nothing the second time.
 */

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
 * expires_at (a retried or reset persist changes nothing, and `completedNow` is false); a refunded
 * one is left alone (null).
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
  // A refunded generation never succeeds: nothing is written, and the caller hears null.
  const row = await db.one(sql.type(
    z.object({ expires_at: z.string().nullable(), completed_now: z.boolean() }),
  )`
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
    SELECT coalesce((SELECT expires_at FROM done), (SELECT expires_at FROM target)) AS expires_at,
      EXISTS (SELECT 1 FROM done) AS completed_now`);
  return row.expires_at ? { expiresAt: row.expires_at, completedNow: row.completed_now } : null;
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
