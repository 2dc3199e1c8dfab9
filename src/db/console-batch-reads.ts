import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * What the console shows of a batch's lines: each line's status (its generation's once started,
 * else the line's own: pending, refused, canceled, expired), a page at a time, filterable by it.
 */
export const batchLineStatuses = [
  'pending',
  'queued',
  'succeeded',
  'failed',
  'rejected',
  'refused',
  'canceled',
  'expired',
] as const;
export type BatchLineStatus = (typeof batchLineStatuses)[number];

const consoleLineRow = z.object({
  line: z.number(),
  custom_id: z.string(),
  status: z.enum(batchLineStatuses),
  generation_id: z.string().nullable(),
  credits: z.number().nullable(),
  error_code: z.string().nullable(),
});
export type ConsoleBatchLine = z.infer<typeof consoleLineRow>;

/** The lines after `afterLine` in input order, at most `limit`, only those with `status` when given. */
export async function batchLinesPage(
  db: CommonQueryMethods,
  batchId: string,
  page: { status: BatchLineStatus | null; afterLine: number; limit: number },
): Promise<readonly ConsoleBatchLine[]> {
  const byStatus = page.status ? sql.fragment`AND status = ${page.status}` : sql.fragment``;
  return db.any(sql.type(consoleLineRow)`
    SELECT * FROM (
      SELECT l.line, l.custom_id,
             CASE WHEN l.state = 'started' THEN coalesce(g.status, 'queued') ELSE l.state END AS status,
             l.generation_id, g.credits,
             coalesce(g.error ->> 'code', l.error ->> 'code') AS error_code
      FROM batch_lines l LEFT JOIN generations g ON g.id = l.generation_id
      WHERE l.batch_id = ${batchId} AND l.line > ${page.afterLine}) lines
    WHERE true ${byStatus}
    ORDER BY line LIMIT ${page.limit}`);
}
