import type { BatchResultRow } from './batch-lines.js';
import type { BatchCounts, BatchRow } from './batches.js';
import { toGeneration } from './generation-view.js';

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

/** Why a line that never started has no generation: the batch was canceled, or its window passed. */
const lineErrors = {
  canceled: {
    code: 'batch_canceled',
    message: 'The batch was canceled before this line started; nothing was charged.',
  },
  expired: {
    code: 'batch_expired',
    message: 'The completion window passed before this line started; nothing was charged.',
  },
} as const;

/**
 * One line of a batch's results file (GET /v1/batches/{id}/results, and the console's download of
 * it): its custom_id and its generation, or why it has none.
 */
export function batchResultLine(row: BatchResultRow) {
  const error = row.state === 'canceled' || row.state === 'expired' ? lineErrors[row.state] : row.error;
  return {
    line: row.line,
    custom_id: row.custom_id,
    generation: row.generation ? toGeneration(row.generation) : null,
    error: row.generation ? (row.generation.error ?? null) : error,
  };
}
