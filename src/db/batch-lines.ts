import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import {
  generationColumns,
  generationErrorColumn,
  generationRow,
  type GenerationRow,
} from './generation-reads.js';

/**
 * A batch's lines (migration 0026), in input order: written at creation in chunks, read by the
 * batch's workflow a few at a time as it admits them, and read back as the results file.
 */

/** One line as the request gave it: its index, custom_id and the generation's body. */
export interface BatchLineInput {
  line: number;
  customId: string;
  request: Record<string, unknown>;
}

/** A line as it is staged before its batch is written: its request as JSON text. */
export interface StagedBatchLine {
  line: number;
  customId: string;
  requestJson: string;
}

/** Writes a chunk of lines in one statement. */
export async function insertBatchLines(
  db: CommonQueryMethods,
  batchId: string,
  lines: readonly StagedBatchLine[],
): Promise<void> {
  if (lines.length === 0) return;
  await db.query(sql.unsafe`
    INSERT INTO batch_lines (batch_id, line, custom_id, request)
    SELECT ${batchId}, t.line, t.custom_id, t.request::jsonb
    FROM unnest(${sql.array(
      lines.map((l) => l.line),
      'int4',
    )}, ${sql.array(
      lines.map((l) => l.customId),
      'text',
    )}, ${sql.array(
      lines.map((l) => l.requestJson),
      'text',
    )}) AS t(line, custom_id, request)`);
}

/** A line's admission decided: its generation (accepted or refused at admission), or a refusal without one. */
export async function settleLine(
  db: CommonQueryMethods,
  batchId: string,
  line: number,
  outcome: { generationId: string } | { error: { code: string; message: string } },
): Promise<void> {
  if ('generationId' in outcome)
    await db.query(sql.unsafe`
      UPDATE batch_lines SET state = 'started', generation_id = ${outcome.generationId}
      WHERE batch_id = ${batchId} AND line = ${line} AND state = 'pending'`);
  else
    await db.query(sql.unsafe`
      UPDATE batch_lines SET state = 'refused', error = ${sql.jsonb(outcome.error)},
                             ended_at = date_trunc('milliseconds', now())
      WHERE batch_id = ${batchId} AND line = ${line} AND state = 'pending'`);
}

const endedRow = z.object({ ended: z.number() });

/**
 * Every line not admitted yet ends `state` (a cancel, the completion window): never charged. A
 * pending line whose generation exists (its admission answered the slice too late, or the slice's
 * worker died before writing it) is linked to it instead. end_pending_batch_lines() (migration 0036)
 * does both under the account's lock, against which admit_generation() refuses the lines of an
 * ended batch; `expired` ends nothing before the database's clock reaches expires_at.
 */
export async function endPendingLines(
  db: CommonQueryMethods,
  batchId: string,
  state: 'canceled' | 'expired',
): Promise<number> {
  return db.oneFirst(sql.type(endedRow)`SELECT end_pending_batch_lines(${batchId}, ${state}) AS ended`);
}

const standingRow = z.object({
  pending: z.coerce.number(),
  queued: z.coerce.number(),
  holding: z.coerce.number(),
  waiting: z.coerce.number(),
});

/** A waiter that has not tried for this long has stopped waiting (as in provider-slots.ts). */
const waiterGoneAfterSeconds = 10;

/**
 * Lines not admitted yet (counted up to `pendingUpTo` when given: a slice asks often, and a count of
 * a 50,000-line batch's pending lines takes ~10 ms, while "at least n" reads n index entries); the
 * batch's generations still queued (in flight); and those of them holding a capped provider's
 * place, and waiting for one (both tables hold only places in use and their waiters: a few rows
 * per provider).
 */
export async function lineStanding(
  db: CommonQueryMethods,
  batchId: string,
  pendingUpTo?: number,
): Promise<{ pending: number; queued: number; holding: number; waiting: number }> {
  const pending =
    pendingUpTo === undefined
      ? sql.fragment`SELECT 1 FROM batch_lines WHERE batch_id = ${batchId} AND state = 'pending'`
      : sql.fragment`SELECT 1 FROM batch_lines WHERE batch_id = ${batchId} AND state = 'pending' LIMIT ${pendingUpTo}`;
  return db.one(sql.type(standingRow)`
    SELECT (SELECT count(*) FROM (${pending}) p) AS pending,
           (SELECT count(*) FROM generations WHERE batch_id = ${batchId} AND status = 'queued') AS queued,
           (SELECT count(*) FROM provider_slots s JOIN generations g ON g.id = s.generation_id
            WHERE s.batch_id = ${batchId} AND g.status = 'queued') AS holding,
           (SELECT count(*) FROM provider_place_waiters w JOIN generations g ON g.id = w.generation_id
            WHERE w.batch_id = ${batchId} AND g.status = 'queued'
              AND w.tried_at > now() - make_interval(secs => ${waiterGoneAfterSeconds})) AS waiting`);
}

const queuedRow = z.object({ id: z.string() });

/** The batch's generations still queued (a cancel asks each to stop). */
export async function queuedGenerationsOf(db: CommonQueryMethods, batchId: string): Promise<string[]> {
  const rows = await db.any(sql.type(queuedRow)`
    SELECT id FROM generations WHERE batch_id = ${batchId} AND status = 'queued' ORDER BY id`);
  return rows.map((r) => r.id);
}

/** One line of the results file: its index and custom_id, and its generation or why it has none. */
export interface BatchResultRow {
  line: number;
  custom_id: string;
  state: 'pending' | 'started' | 'refused' | 'canceled' | 'expired';
  error: { code: string; message: string } | null;
  generation: GenerationRow | null;
}

const resultRow = z.object({
  line: z.number(),
  custom_id: z.string(),
  state: z.enum(['pending', 'started', 'refused', 'canceled', 'expired']),
  line_error: generationErrorColumn.nullable(),
  generation: generationRow.nullable(),
});

/**
 * The batch's finished lines after `afterLine`, in input order, at most `limit`: lines whose
 * generation has ended, and lines that ended without one (refused, canceled, expired).
 */
export async function finishedLinesAfter(
  db: CommonQueryMethods,
  batchId: string,
  afterLine: number,
  limit: number,
): Promise<BatchResultRow[]> {
  const rows = await db.any(sql.type(resultRow)`
    SELECT l.line, l.custom_id, l.state, l.error AS line_error,
           CASE WHEN g.id IS NULL THEN NULL ELSE to_jsonb(g) END AS generation
    FROM batch_lines l
    LEFT JOIN LATERAL (SELECT ${generationColumns} FROM generations WHERE id = l.generation_id) g ON true
    WHERE l.batch_id = ${batchId} AND l.line > ${afterLine} AND l.state <> 'pending'
      AND (g.id IS NULL OR g.status <> 'queued')
    ORDER BY l.line LIMIT ${limit}`);
  return rows.map((r) => ({
    line: r.line,
    custom_id: r.custom_id,
    state: r.state,
    error: r.line_error,
    generation: r.generation && {
      ...r.generation,
      // to_jsonb() holds PostgreSQL's own timestamp text: shown the way columns are.
      created_at: iso(r.generation.created_at)!,
      completed_at: iso(r.generation.completed_at),
      expires_at: iso(r.generation.expires_at),
    },
  }));
}

const iso = (value: string | null) => (value === null ? null : new Date(value).toISOString());
