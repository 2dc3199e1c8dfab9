import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { generationColumns, generationRow, type GenerationRow } from './generation-reads.js';

/** The generation an Idempotency-Key's record names, as it stands now, and the fingerprint of the body that claimed the key. */
export interface KeyHolder {
  fingerprint: string;
  row: GenerationRow;
}

const keyHolderRow = generationRow.extend({ key_fingerprint: z.string() });

/**
 * The generation whose record holds this API key's Idempotency-Key at `at`, if any (migration
 * 0012): the debit writes the record, with the generation's row, when it claims the key.
 */
export async function keyHolder(
  db: CommonQueryMethods,
  apiKeyId: string,
  idempotencyKey: string,
  at: Date,
): Promise<KeyHolder | null> {
  const found = await db.maybeOne(sql.type(keyHolderRow)`
    SELECT k.fingerprint AS key_fingerprint, g.*
    FROM idempotency_keys k, LATERAL (SELECT ${generationColumns} FROM generations WHERE id = k.generation_id) g
    WHERE k.api_key_id = ${apiKeyId} AND k.idempotency_key = ${idempotencyKey}
      AND k.held_until > ${at.toISOString()}::timestamptz`);
  if (!found) return null;
  const { key_fingerprint: fingerprint, ...row } = found;
  return { fingerprint, row };
}
