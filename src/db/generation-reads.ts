import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { generationStatuses, type GenerationStatus } from '../vocabulary/generation.js';

/** The generations projection as clients read it: one generation, or a page of an account's. */

const jsonObject = z.record(z.string(), z.unknown());
/** The error column: a generation's `{ code, message }`. */
export const generationErrorColumn = z.object({ code: z.string(), message: z.string() });

export const generationRow = z.object({
  id: z.string(),
  account_id: z.string(),
  status: z.enum(generationStatuses),
  model: z.string(),
  media_type: z.string(),
  credits: z.number(),
  credits_refunded: z.boolean(),
  input: jsonObject.nullable(),
  output: jsonObject.nullable(),
  error: generationErrorColumn.nullable(),
  needs_review: z.boolean(),
  content_expired: z.boolean(),
  created_at: z.string(),
  completed_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  /** The provider of the route serving (or that served) it; null before a create left (0019). */
  provider: z.string().nullable(),
  /** The batch it is a line of, and that line's `custom_id` (migration 0026); null for others. */
  batch_id: z.string().nullable(),
  custom_id: z.string().nullable(),
  /** Its Cancel-After deadline (migration 0028): ISO time, or null without one. */
  cancel_after: z.string().nullable(),
});
export type GenerationRow = z.infer<typeof generationRow>;

// What reads show. The generations_changed trigger (migration 0006) announces a change to exactly these
// columns, so API processes drop their cached copy: keep the two in step.
export const generationColumns = sql.fragment`id, account_id, status, model, media_type, credits, credits_refunded, input, output, error,
  needs_review, content_expired, created_at, completed_at, expires_at, provider, batch_id, custom_id, cancel_after`;

export async function getGeneration(
  db: CommonQueryMethods,
  accountId: string,
  id: string,
): Promise<GenerationRow | null> {
  return db.maybeOne(
    sql.type(
      generationRow,
    )`SELECT ${generationColumns} FROM generations WHERE id = ${id} AND account_id = ${accountId}`,
  );
}

export interface ListFilter {
  accountId: string;
  limit: number;
  statuses: GenerationStatus[] | null;
  model: string | null;
  /** Only the generation whose Idempotency-Key record (migration 0012) holds this key now. */
  idempotencyKey?: { apiKeyId: string; key: string } | null;
  /** Exclusive position to continue after (newest first). */
  after: { createdAt: string; id: string } | null;
}

export async function listGenerations(
  db: CommonQueryMethods,
  filter: ListFilter,
): Promise<readonly GenerationRow[]> {
  const conditions = [sql.fragment`account_id = ${filter.accountId}`];
  if (filter.statuses) conditions.push(sql.fragment`status = ANY(${sql.array(filter.statuses, 'text')})`);
  if (filter.model !== null) conditions.push(sql.fragment`model = ${filter.model}`);
  if (filter.idempotencyKey) {
    const { apiKeyId, key } = filter.idempotencyKey;
    conditions.push(sql.fragment`id = (SELECT k.generation_id FROM idempotency_keys k
      WHERE k.api_key_id = ${apiKeyId} AND k.idempotency_key = ${key} AND k.held_until > now())`);
  }
  if (filter.after) {
    conditions.push(
      sql.fragment`(created_at, id) < (${filter.after.createdAt}::timestamptz, ${filter.after.id})`,
    );
  }
  return db.any(sql.type(generationRow)`
    SELECT ${generationColumns} FROM generations WHERE ${sql.join(conditions, sql.fragment` AND `)}
    ORDER BY created_at DESC, id DESC LIMIT ${filter.limit}`);
}
