import type { GenerationEventRow } from './generation-events.js';
import type { GenerationRow } from './generation-reads.js';

/**
 * The spec's Generation object made from its projection row, the same at every stage and on every
 * channel (create, get, list item, replay, an event in the JSON list or an SSE stream, a webhook
 * body): one function, so no channel can show a field another lacks. Content past its retention
 * shows as null. The API's response schemas (src/api/schemas.ts) check its shape.
 */
export function toGeneration(row: GenerationRow) {
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
    batch_id: row.batch_id,
    custom_id: row.custom_id,
    cancel_after: row.cancel_after,
  };
}

/** One event as clients read it: in the JSON list, in an SSE `data:` line and as a webhook body. */
export function toGenerationEvent(event: GenerationEventRow) {
  return {
    id: event.seq,
    type: event.type,
    created_at: event.created_at,
    data: toGeneration(event.generation),
  };
}
