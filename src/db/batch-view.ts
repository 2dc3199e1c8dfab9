import type { BatchCounts, BatchRow } from './batches.js';

/**
 * The Batch object as clients read it (GET /v1/batches/{id}, list items, and the resource of its
 * events): one function, so no channel shows a field another lacks.
 */
export function toBatch(row: BatchRow, counts: BatchCounts) {
  return {
    id: row.id,
    status: row.status,
    completion_window: row.completion_window,
    request_counts: {
      total: counts.total,
      pending: counts.pending,
      queued: counts.queued,
      succeeded: counts.succeeded,
      failed: counts.failed,
      rejected: counts.rejected,
      refused: counts.refused,
      canceled: counts.canceled,
      expired: counts.expired,
    },
    credits_quoted: row.quoted_credits,
    credits_spent: counts.creditsSpent,
    metadata: row.metadata,
    created_at: row.created_at,
    started_at: row.started_at,
    completed_at: row.completed_at,
    expires_at: row.expires_at,
  };
}

/** The resource a batch event carries: the Batch, and the account it belongs to (for the account's log). */
export function batchEventResource(row: BatchRow, counts: BatchCounts) {
  return { ...toBatch(row, counts), account_id: row.account_id };
}
