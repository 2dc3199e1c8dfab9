import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { generationStatuses } from '../vocabulary/generation.js';
import { requestLogColumns, requestLogRow } from './request-log-repository.js';

/** What the account console reads beyond the API's own reads: the gallery, usage by day, key use, the request log by page. */

/**
 * A place in a page ordered newest first by (created_at, id), the order of the gallery's and the
 * request log's (account_id, created_at DESC) indexes: the last row shown, by its time (in
 * microseconds since the epoch, exact) and id, so that deleting that row (an image expiring, a log
 * line pruned) does not lose the place.
 */
export interface PageCursor {
  createdUs: number;
  id: number;
}

/** `before=` in a console link: `<createdUs>_<id>`; anything else is the first page. */
export function parsePageCursor(text: unknown): PageCursor | null {
  const match = /^(\d{1,16})_(\d{1,15})$/.exec(typeof text === 'string' ? text : '');
  return match ? { createdUs: Number(match[1]), id: Number(match[2]) } : null;
}
/** The `before=` that continues a page after this row (one read with its `created_us`). */
export const cursorAfter = (row: { created_us: number; id: number }): string => `${row.created_us}_${row.id}`;

/** The column a row's cursor is read from. */
const createdUs = (alias: string) =>
  sql.fragment`(extract(epoch FROM ${sql.identifier([alias, 'created_at'])}) * 1000000)::bigint AS created_us`;

function olderThan(alias: string, cursor: PageCursor) {
  const row = sql.identifier([alias]);
  return sql.fragment`(${row}.created_at, ${row}.id) <
    (timestamptz 'epoch' + ${cursor.createdUs} * interval '1 microsecond', ${cursor.id})`;
}

const galleryRow = z.object({
  id: z.number(),
  generation_id: z.string(),
  url: z.string(),
  width: z.number(),
  height: z.number(),
  created_at: z.string(),
  created_us: z.number(),
  model: z.string(),
  prompt: z.string().nullable(),
  credits: z.number(),
  expires_at: z.string().nullable(),
  content_expired: z.boolean(),
});
export type GalleryImage = z.infer<typeof galleryRow>;

const galleryColumns = sql.fragment`gi.id, gi.generation_id, gi.url, gi.width, gi.height, gi.created_at, ${createdUs('gi')},
  g.model, g.input->>'prompt' AS prompt, g.credits, g.expires_at, g.content_expired`;

/** The query of a gallery page (exported for the test that reads its plan). */
export function galleryPageQuery(filter: GalleryFilter) {
  const conditions = [sql.fragment`gi.account_id = ${filter.accountId}`];
  if (filter.model) conditions.push(sql.fragment`g.model = ${filter.model}`);
  if (filter.before !== null) conditions.push(olderThan('gi', filter.before));
  return sql.type(galleryRow)`
    SELECT ${galleryColumns} FROM gallery_images gi JOIN generations g ON g.id = gi.generation_id
    WHERE ${sql.join(conditions, sql.fragment` AND `)}
    ORDER BY gi.created_at DESC, gi.id DESC LIMIT ${filter.limit}`;
}
export interface GalleryFilter {
  accountId: string;
  model: string | null;
  limit: number;
  before: PageCursor | null;
}

/** The account's persisted images, newest first, after `before` when given. */
export async function listGallery(
  db: CommonQueryMethods,
  filter: GalleryFilter,
): Promise<readonly GalleryImage[]> {
  return db.any(galleryPageQuery(filter));
}

export async function getGalleryImage(
  db: CommonQueryMethods,
  accountId: string,
  id: number,
): Promise<GalleryImage | null> {
  return db.maybeOne(sql.type(galleryRow)`
    SELECT ${galleryColumns} FROM gallery_images gi JOIN generations g ON g.id = gi.generation_id
    WHERE gi.account_id = ${accountId} AND gi.id = ${id}`);
}

const galleryModelsRow = z.object({ model: z.string() });

/** The models the account's gallery holds images of (for its filter). */
export async function galleryModels(db: CommonQueryMethods, accountId: string): Promise<readonly string[]> {
  return db.anyFirst(sql.type(galleryModelsRow)`
    SELECT DISTINCT g.model FROM gallery_images gi JOIN generations g ON g.id = gi.generation_id
    WHERE gi.account_id = ${accountId} ORDER BY g.model`);
}

const dayRow = z.object({
  day: z.string(),
  credits: z.number(),
  ...Object.fromEntries(generationStatuses.map((s) => [s, z.number()])),
});
export interface UsageDay {
  /** YYYY-MM-DD (UTC). */
  day: string;
  /** Credits spent that day: debits less the refunds made that day. */
  credits: number;
  outcomes: Record<(typeof generationStatuses)[number], number>;
}

/** The last `days` days (UTC), today included, oldest first: credits spent and generations by status. */
export async function usageByDay(
  db: CommonQueryMethods,
  accountId: string,
  days: number,
): Promise<UsageDay[]> {
  const rows = await db.any(sql.type(dayRow)`
    WITH days AS (
      SELECT d::date AS day FROM generate_series(
        (now() AT TIME ZONE 'UTC')::date - ${days - 1}::int, (now() AT TIME ZONE 'UTC')::date, interval '1 day') d
    ), spent AS (
      SELECT (created_at AT TIME ZONE 'UTC')::date AS day, -sum(subscription_delta + one_time_delta)::int AS credits
      FROM credit_ledger WHERE account_id = ${accountId} AND kind IN ('debit', 'refund')
        AND created_at >= now() - ${sql.interval({ days: days + 1 })}
      GROUP BY 1
    ), made AS (
      SELECT (created_at AT TIME ZONE 'UTC')::date AS day,
        ${sql.join(
          generationStatuses.map(
            (s) => sql.fragment`count(*) FILTER (WHERE status = ${s})::int AS ${sql.identifier([s])}`,
          ),
          sql.fragment`, `,
        )}
      FROM generations WHERE account_id = ${accountId} AND created_at >= now() - ${sql.interval({ days: days + 1 })}
      GROUP BY 1
    )
    SELECT to_char(days.day, 'YYYY-MM-DD') AS day, COALESCE(spent.credits, 0) AS credits,
      ${sql.join(
        generationStatuses.map(
          (s) => sql.fragment`COALESCE(made.${sql.identifier([s])}, 0) AS ${sql.identifier([s])}`,
        ),
        sql.fragment`, `,
      )}
    FROM days LEFT JOIN spent ON spent.day = days.day LEFT JOIN made ON made.day = days.day
    ORDER BY days.day`);
  return rows.map((row) => {
    const r = row as Record<string, unknown>;
    return {
      day: row.day,
      credits: row.credits,
      outcomes: Object.fromEntries(generationStatuses.map((s) => [s, Number(r[s])])) as UsageDay['outcomes'],
    };
  });
}

const keysLastUsedRow = z.object({ api_key_id: z.string(), last_used: z.string() });

/** When each of the account's keys last made a request (keys never used are absent). */
export async function keysLastUsed(db: CommonQueryMethods, accountId: string): Promise<Map<string, string>> {
  const rows = await db.any(sql.type(keysLastUsedRow)`
    SELECT api_key_id, max(created_at) AS last_used FROM api_request_log
    WHERE account_id = ${accountId} GROUP BY api_key_id`);
  return new Map(rows.map((r) => [r.api_key_id, r.last_used]));
}

/** A request log row with its creation time in microseconds (the page cursor's). */
const logRow = requestLogRow.extend({ created_us: z.number() });
export type RequestLogLine = z.infer<typeof logRow>;

/** The query of a request log page (exported for the test that reads its plan). */
export function requestLogPageQuery(accountId: string, limit: number, before: PageCursor | null) {
  return sql.type(logRow)`
    SELECT ${requestLogColumns}, ${createdUs('api_request_log')}
    FROM api_request_log WHERE account_id = ${accountId}
      ${before === null ? sql.fragment`` : sql.fragment`AND ${olderThan('api_request_log', before)}`}
    ORDER BY created_at DESC, id DESC LIMIT ${limit}`;
}

/** The account's request log, newest first, after `before` when given. */
export async function requestLogPage(
  db: CommonQueryMethods,
  accountId: string,
  limit: number,
  before: PageCursor | null,
): Promise<readonly RequestLogLine[]> {
  return db.any(requestLogPageQuery(accountId, limit, before));
}

const generationWorkflowIdRow = z.object({ workflow_id: z.string().nullable() });

/** The workflow a generation of the account's runs in (null: none recorded, or not the account's). */
export async function generationWorkflowId(
  db: CommonQueryMethods,
  accountId: string,
  id: string,
): Promise<string | null> {
  return db.maybeOneFirst(sql.type(generationWorkflowIdRow)`
    SELECT workflow_id FROM generations WHERE id = ${id} AND account_id = ${accountId}`);
}
