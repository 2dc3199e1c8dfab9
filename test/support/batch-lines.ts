import { sql } from 'slonik';
import { expect } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { finishedLinesAfter } from '../../src/db/batch-lines.js';
import { batchResultLine } from '../../src/db/batch-view.js';
import { batchCounts, getBatch } from '../../src/db/batches.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { bearer, type TestAccount } from './api.js';

/** A batch as it stands in PostgreSQL (for a batch whose key can no longer read it): its row and counts. */
export async function readBatchFromDb(pool: DatabasePool, batchId: string) {
  const row = (await getBatch(pool, null, batchId))!;
  return { row, counts: await batchCounts(pool, row) };
}

/** One line of the results file, as clients read it. */
interface ResultLine {
  line: number;
  custom_id: string;
  generation: { id: string; credits: number; credits_refunded: boolean } | null;
  error: { code: string; message: string } | null;
}

/** What a batch's results file says, against the generations and the ledger. */
export interface LedgerOfLines {
  /** custom_ids of the lines with a generation, in input order. */
  started: string[];
  /** custom_ids of the lines that say they never started (batch_canceled, batch_expired). */
  neverStarted: string[];
  /** Lines that say they never started, yet a generation exists under their Idempotency-Key. */
  neverStartedWithGeneration: string[];
  /** Generations of the batch that no line names. */
  unlinkedGenerations: string[];
  /** What the lines' generations were charged, refunds taken off. */
  linesCharged: number;
}

const keyedRow = z.object({ id: z.string(), idempotency_key: z.string().nullable() });

/**
 * Reads the batch's results file (GET /v1/batches/{id}/results with `api`; without, the same lines
 * from PostgreSQL, for a key that can read no more) and holds it against the batch's generations.
 */
export async function batchLedger(
  api: ApiService | null,
  pool: DatabasePool,
  account: TestAccount,
  batchId: string,
): Promise<LedgerOfLines> {
  let lines: ResultLine[];
  if (api) {
    const response = await api.app.inject({
      method: 'GET',
      url: `/v1/batches/${batchId}/results`,
      headers: bearer(account.key),
    });
    expect(response.statusCode, response.body).toBe(200);
    lines = response.body
      .split('\n')
      .filter(Boolean)
      .map((text) => JSON.parse(text) as ResultLine);
  } else {
    lines = (await finishedLinesAfter(pool, batchId, -1, 100_000)).map(
      (row) => batchResultLine(row) as unknown as ResultLine,
    );
  }
  const generations = await pool.any(sql.type(keyedRow)`
    SELECT id, idempotency_key FROM generations WHERE account_id = ${account.accountId}`);
  const keyed = new Set(generations.map((g) => g.idempotency_key));
  const named = new Set(lines.flatMap((l) => (l.generation ? [l.generation.id] : [])));
  const neverStarted = lines.filter(
    (l) => l.error?.code === 'batch_canceled' || l.error?.code === 'batch_expired',
  );
  return {
    started: lines.filter((l) => l.generation).map((l) => l.custom_id),
    neverStarted: neverStarted.map((l) => l.custom_id),
    neverStartedWithGeneration: neverStarted
      .filter((l) => l.generation !== null || keyed.has(`${batchId}:${l.line}`))
      .map((l) => l.custom_id),
    unlinkedGenerations: generations.filter((g) => !named.has(g.id)).map((g) => g.id),
    linesCharged: lines.reduce(
      (sum, l) => sum + (l.generation && !l.generation.credits_refunded ? l.generation.credits : 0),
      0,
    ),
  };
}
