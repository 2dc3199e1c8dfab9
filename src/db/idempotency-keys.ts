import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { generationErrorColumn } from './generation-reads.js';

const holderRow = z.object({
  generation_id: z.string(),
  fingerprint: z.string(),
  status: z.string(),
  error: generationErrorColumn.nullable(),
});
/** The generation an Idempotency-Key's record names, as it stands now. */
export type KeyHolder = z.infer<typeof holderRow>;

/**
 * The generation whose record holds this API key's Idempotency-Key at `at`, if any (migration
 * 0012): admission writes the record, with the generation's row, when it claims the key.
 */
export async function keyHolder(
  db: CommonQueryMethods,
  apiKeyId: string,
  idempotencyKey: string,
  at: Date,
): Promise<KeyHolder | null> {
  return db.maybeOne(sql.type(holderRow)`
    SELECT k.generation_id, k.fingerprint, g.status, g.error
    FROM idempotency_keys k JOIN generations g ON g.id = k.generation_id
    WHERE k.api_key_id = ${apiKeyId} AND k.idempotency_key = ${idempotencyKey}
      AND k.held_until > ${at.toISOString()}::timestamptz`);
}
