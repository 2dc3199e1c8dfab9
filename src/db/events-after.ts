import { sql, type CommonQueryMethods } from 'slonik';
import type { z } from 'zod';

/**
 * The read every event log answers (a generation's, migration 0016; a batch's, migration 0026):
 * a subject's events after a number. Each log is its table and the column naming its subject;
 * both number their events from 1 per subject (seq) and keep the subject as it was (resource).
 */
const eventLogs = {
  generation: { table: sql.identifier(['generation_events']), subject: sql.identifier(['generation_id']) },
  batch: { table: sql.identifier(['batch_events']), subject: sql.identifier(['batch_id']) },
};

export interface EventsAfterOptions {
  /** At most this many events after `afterSeq` (1000 when absent). */
  limit?: number;
  /**
   * The subject's newest event too, even when it is not after `afterSeq`: whether the subject has
   * ended, and the reader has seen all there is, is then known from one read.
   */
  withNewest?: boolean;
}

/**
 * The events of `subjectId` in its `log` after `afterSeq` (0: all of them), oldest first, as `row`
 * parses each selected row (seq, type, created_at, resource).
 */
export function eventsAfter<Row extends z.ZodType>(
  db: CommonQueryMethods,
  log: keyof typeof eventLogs,
  subjectId: string,
  afterSeq: number,
  row: Row,
  options: EventsAfterOptions = {},
): Promise<readonly z.infer<Row>[]> {
  const { table, subject } = eventLogs[log];
  const after = sql.fragment`(SELECT seq, type, created_at, resource FROM ${table}
    WHERE ${subject} = ${subjectId} AND seq > ${afterSeq} ORDER BY seq LIMIT ${options.limit ?? 1000})`;
  const newest = sql.fragment`(SELECT seq, type, created_at, resource FROM ${table}
    WHERE ${subject} = ${subjectId} ORDER BY seq DESC LIMIT 1)`;
  return db.any(sql.type(row)`
    SELECT * FROM (${options.withNewest ? sql.fragment`${after} UNION ${newest}` : after}) e ORDER BY seq`);
}
