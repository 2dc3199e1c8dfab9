import type { z } from 'zod';
import type { GenerationRow } from '../db/generation-reads.js';
import type { generationSchema } from './schemas.js';

/** The spec's Generation object, the same at every stage (create, get, list item, replay). */
type Generation = z.infer<typeof generationSchema>;

/** A generation's projection row as the API shows it; content past its retention shows as null. */
export function toGeneration(row: GenerationRow): Generation {
  return {
    id: row.id,
    status: row.status,
    model: row.model,
    media_type: row.media_type,
    credits: row.credits,
    credits_refunded: row.credits_refunded,
    input: row.content_expired ? null : row.input,
    output: row.content_expired ? null : row.output,
    error: row.error,
    created_at: row.created_at,
    completed_at: row.completed_at,
    expires_at: row.expires_at,
    content_expired: row.content_expired,
    provider: row.provider,
  };
}
