import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { ProviderResult } from '../provider.js';

/**
 * The OpenAI adapter's table (migration 0009): one row per call we owe OpenAI, moved between its
 * states only by conditional updates, so that two workers can never both send it.
 */

type CallEndpoint = 'generations' | 'edits';

/** What a call sends: OpenAI's model, the other input fields, and the reference image URLs (edits). */
export interface CallRequest {
  model: string;
  input: Record<string, unknown>;
  images: string[];
}

const callRequest = z.object({
  model: z.string(),
  input: z.record(z.string(), z.unknown()),
  images: z.array(z.string()),
});
const resultMeta = z.array(z.object({ width: z.number(), height: z.number(), contentType: z.string() }));

const callRow = z.object({
  job_id: z.string(),
  endpoint: z.enum(['generations', 'edits']),
  request: callRequest.nullable(),
  state: z.enum(['pending', 'sent', 'succeeded', 'failed', 'lost', 'canceled']),
  error: z.string().nullable(),
  results: resultMeta.nullable(),
});
export type CallRow = z.infer<typeof callRow>;
const callColumns = sql.fragment`job_id, endpoint, request, state, error, results`;

const recordCallRow = z.object({ job_id: z.string() });

/** Records a call to make; a token seen before keeps its first row. The call's job id either way. */
export async function recordCall(
  db: CommonQueryMethods,
  call: { jobId: string; token: string; endpoint: CallEndpoint; request: CallRequest },
): Promise<string> {
  return db.oneFirst(sql.type(recordCallRow)`
    INSERT INTO openai_image_calls (job_id, token, endpoint, request)
    VALUES (${call.jobId}, ${call.token}, ${call.endpoint}, ${sql.jsonb(call.request as never)})
    ON CONFLICT (token) DO UPDATE SET submissions = openai_image_calls.submissions + 1
    RETURNING job_id`);
}

const callOfTokenRow = z.object({ job_id: z.string() });

export async function callOfToken(db: CommonQueryMethods, token: string): Promise<string | null> {
  return db.maybeOneFirst(sql.type(callOfTokenRow)`
    SELECT job_id FROM openai_image_calls WHERE token = ${token}`);
}

export async function readCall(db: CommonQueryMethods, jobId: string): Promise<CallRow | null> {
  return db.maybeOne(sql.type(callRow)`
    SELECT ${callColumns} FROM openai_image_calls WHERE job_id = ${jobId}`);
}

const claimCallRow = z.object({ job_id: z.string() });

/**
 * Takes a pending call for sending: true for exactly one caller, whoever else tries at the same
 * time (another worker, a retried attempt). Must happen before a byte is sent.
 */
export async function claimCall(db: CommonQueryMethods, jobId: string): Promise<boolean> {
  const claimed = await db.maybeOneFirst(sql.type(claimCallRow)`
    UPDATE openai_image_calls SET state = 'sent', sent_at = now(), sends = sends + 1
    WHERE job_id = ${jobId} AND state = 'pending'
    RETURNING job_id`);
  return claimed !== null;
}

/** Nothing reached OpenAI: the call may be sent again later. */
export async function releaseCall(db: CommonQueryMethods, jobId: string, reason: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE openai_image_calls SET state = 'pending', sent_at = NULL, error = ${reason}
    WHERE job_id = ${jobId} AND state = 'sent'`);
}

/** OpenAI (or, before sending, our reading of its reference images) refused the input: nothing ran. */
export async function failCall(
  db: CommonQueryMethods,
  jobId: string,
  from: 'pending' | 'sent',
  message: string,
): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE openai_image_calls SET state = 'failed', finished_at = now(), error = ${message}, request = NULL
    WHERE job_id = ${jobId} AND state = ${from}`);
}

/** The call left us and its answer was lost: OpenAI may have run and billed it. */
export async function loseCall(db: CommonQueryMethods, jobId: string, message: string): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE openai_image_calls SET state = 'lost', finished_at = now(), error = ${message}, request = NULL
    WHERE job_id = ${jobId} AND state = 'sent'`);
}

/** Stages the images OpenAI answered with and marks the call succeeded, together. */
export async function completeCall(
  db: CommonQueryMethods,
  jobId: string,
  images: Array<ProviderResult & { bytes: Buffer }>,
): Promise<void> {
  const meta = images.map(({ width, height, contentType }) => ({ width, height, contentType }));
  await db.transaction(async (tx) => {
    for (const [index, image] of images.entries()) {
      await tx.query(sql.unsafe`
        INSERT INTO openai_image_results (job_id, index, content_type, bytes)
        VALUES (${jobId}, ${index}, ${image.contentType}, ${sql.binary(image.bytes)})`);
    }
    await tx.query(sql.unsafe`
      UPDATE openai_image_calls
      SET state = 'succeeded', finished_at = now(), error = NULL, request = NULL, results = ${sql.jsonb(meta)}
      WHERE job_id = ${jobId} AND state = 'sent'`);
  });
}

const cancelCallRow = z.object({ job_id: z.string() });

/** A call not sent yet is never sent; one already sent cannot be stopped. True when it was pending. */
export async function cancelCall(db: CommonQueryMethods, jobId: string): Promise<boolean> {
  const canceled = await db.maybeOneFirst(sql.type(cancelCallRow)`
    UPDATE openai_image_calls
    SET state = 'canceled', finished_at = now(), error = 'canceled before it was sent', request = NULL
    WHERE job_id = ${jobId} AND state = 'pending'
    RETURNING job_id`);
  return canceled !== null;
}

const stagedResultRow = z.object({ bytes: z.instanceof(Buffer), content_type: z.string() });

export async function stagedResult(
  db: CommonQueryMethods,
  jobId: string,
  index: number,
): Promise<{ bytes: Buffer; contentType: string } | null> {
  const row = await db.maybeOne(sql.type(stagedResultRow)`
    SELECT bytes, content_type FROM openai_image_results WHERE job_id = ${jobId} AND index = ${index}`);
  return row && { bytes: row.bytes, contentType: row.content_type };
}

/**
 * Deletes staged images older than `stagedMs` and call rows older than `recordsMs` (with their
 * images). Returns what went, for operators and tests.
 */
export async function purgeCalls(
  db: CommonQueryMethods,
  retention: { stagedMs: number; recordsMs: number },
): Promise<{ images: number; calls: number }> {
  const images = await db.query(sql.unsafe`
    DELETE FROM openai_image_results
    WHERE staged_at < now() - ${sql.interval({ seconds: retention.stagedMs / 1000 })}`);
  const calls = await db.query(sql.unsafe`
    DELETE FROM openai_image_calls
    WHERE created_at < now() - ${sql.interval({ seconds: retention.recordsMs / 1000 })}`);
  return { images: images.rowCount, calls: calls.rowCount };
}
