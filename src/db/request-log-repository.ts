import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export interface RequestLogEntry {
  accountId: string;
  apiKeyId: string;
  requestId: string;
  method: string;
  path: string;
  statusCode: number;
  errorCode: string | null;
  ip: string | null;
  userAgent: string | null;
  durationMs: number;
  /** Epoch milliseconds. */
  createdAtMs: number;
}

/**
 * One answered request as the log keeps it, from whichever door took it (the API's hook, the
 * console's playground, which logs its form as the POST it stands for): the key that made it, the
 * answer, and the caller's address and agent, cut to the columns' lengths; stamped now.
 */
export function requestLogEntry(
  key: { accountId: string; keyId: string },
  request: { requestId: string; method: string; path: string; ip: string | null; userAgent?: string | null },
  answer: { statusCode: number; errorCode: string | null; durationMs: number },
): RequestLogEntry {
  return {
    accountId: key.accountId,
    apiKeyId: key.keyId,
    requestId: request.requestId,
    method: request.method,
    path: request.path.slice(0, 2048),
    statusCode: answer.statusCode,
    errorCode: answer.errorCode,
    ip: request.ip,
    userAgent: request.userAgent?.slice(0, 512) ?? null,
    durationMs: answer.durationMs,
    createdAtMs: Date.now(),
  };
}

const copyStatement =
  'COPY api_request_log (account_id, api_key_id, request_id, method, path, status_code, error_code, ip, user_agent, duration_ms, created_at) FROM STDIN';

/** COPY's text format: tab-separated, \N for NULL, backslash escapes for the four special characters. */
const needsEscape = /[\\\t\n\r]/;
const special = /[\\\t\n\r]/g;
const escapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
const text = (value: string | null) =>
  value === null ? '\\N' : needsEscape.test(value) ? value.replace(special, (c) => escapes[c]!) : value;

// created_at as COPY text, remade at most once per millisecond: at full request rate
// Date#toISOString was a visible share of logging a request.
let isoMs = -1;
let iso = '';
function isoTimestamp(ms: number): string {
  if (ms !== isoMs) {
    isoMs = ms;
    iso = new Date(ms).toISOString();
  }
  return iso;
}

/**
 * One entry as a line of COPY text, made when the entry is taken so that a
 * flush only joins strings. Ids and the method are ours (base62, an HTTP token)
 * and need no escaping; the caller-controlled fields do.
 */
export function toCopyLine(e: RequestLogEntry): string {
  return `${e.accountId}\t${e.apiKeyId}\t${e.requestId}\t${e.method}\t${text(e.path)}\t${e.statusCode}\t${text(e.errorCode)}\t${text(e.ip)}\t${text(e.userAgent)}\t${e.durationMs}\t${isoTimestamp(e.createdAtMs)}\n`;
}

/**
 * Writes chunks of `toCopyLine` lines with one COPY: PostgreSQL's cheapest
 * way in, which matters because every API request adds a row.
 */
export async function copyRequestLogChunks(client: pg.ClientBase, chunks: readonly Buffer[]): Promise<void> {
  if (chunks.length === 0) return;
  await pipeline(Readable.from(chunks), client.query(copyFrom(copyStatement)));
}

/**
 * A row of api_request_log (migration 0001) as reads show it, for every reader (support's command
 * line, the console's pages): the account is the reader's, and the user agent is not shown.
 */
export const requestLogRow = z.object({
  id: z.number(),
  request_id: z.string(),
  api_key_id: z.string(),
  method: z.string(),
  path: z.string(),
  status_code: z.number(),
  error_code: z.string().nullable(),
  ip: z.string().nullable(),
  duration_ms: z.number(),
  created_at: z.string(),
});
export type RequestLogRow = z.infer<typeof requestLogRow>;
/** The columns of requestLogRow, to select from api_request_log (or an alias of it). */
export const requestLogColumns = sql.fragment`id, request_id, api_key_id, method, path, status_code, error_code, ip, duration_ms, created_at`;

export async function listRequestLog(
  db: CommonQueryMethods,
  accountId: string,
  limit: number,
): Promise<readonly RequestLogRow[]> {
  return db.any(sql.type(requestLogRow)`
    SELECT ${requestLogColumns}
    FROM api_request_log WHERE account_id = ${accountId}
    ORDER BY created_at DESC, id DESC LIMIT ${limit}`);
}
