import { sql, type CommonQueryMethods } from 'slonik';
import type { GenerationError } from '../vocabulary/generation.js';

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
