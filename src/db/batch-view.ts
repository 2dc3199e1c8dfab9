import type { CommonQueryMethods } from 'slonik';
import { finishedLinesAfter, type BatchResultRow } from './batch-lines.js';
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

/** Lines of the results file read at once: the file is never held whole. */
const resultsPageSize = 500;

/**
 * The results file after line `after` (GET /v1/batches/{id}/results, the console's download), as
 * JSONL text read page by page. Its first page is read before it is returned, so that a failure
 * there is the request's own error answer. A later page that cannot be read (PostgreSQL failed)
 * ends the file with one line of its own, the spec's error envelope
 * `{"error": {"code": "service_unavailable", "message"}}` (no `line`): the answer is already under
 * way, and without it a file cut short would look complete. The clients report it (and, as for a
 * dropped connection, read again after the last line they have). `cutShort` is told the failure.
 */
export async function batchResultsFile(
  db: CommonQueryMethods,
  batchId: string,
  after: number,
  cutShort: (error: unknown) => void = () => undefined,
): Promise<AsyncGenerator<string>> {
  const first = await finishedLinesAfter(db, batchId, after, resultsPageSize);
  return (async function* () {
    let [rows, last] = [first, after];
    try {
      for (;;) {
        for (const row of rows) {
          yield `${JSON.stringify(batchResultLine(row))}\n`;
          last = row.line;
        }
        if (rows.length < resultsPageSize) return;
        rows = await finishedLinesAfter(db, batchId, last, resultsPageSize);
      }
    } catch (error) {
      cutShort(error);
      yield `${JSON.stringify(resultsCutShort(last))}\n`;
    }
  })();
}

/** The last line of a results file cut short after line `last`. */
export function resultsCutShort(last: number) {
  return {
    error: {
      code: 'service_unavailable',
      message: `The results could not be read to their end: this read stops after line ${last}. Read them again with ?after=${last}.`,
    },
  };
}
