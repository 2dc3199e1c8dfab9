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
  createdAt: Date;
}

/** Writes many entries in one statement. */
export async function insertRequestLogEntries(
  db: CommonQueryMethods,
  entries: readonly RequestLogEntry[],
): Promise<void> {
  if (entries.length === 0) return;
  await db.query(sql.unsafe`
    INSERT INTO api_request_log
      (account_id, api_key_id, request_id, method, path, status_code, error_code, ip, user_agent, duration_ms, created_at)
    SELECT * FROM ${sql.unnest(
      entries.map((e) => [
        e.accountId,
        e.apiKeyId,
        e.requestId,
        e.method,
        e.path,
        e.statusCode,
        e.errorCode,
        e.ip,
        e.userAgent,
        e.durationMs,
        e.createdAt.toISOString(),
      ]),
      ['text', 'text', 'text', 'text', 'text', 'int4', 'text', 'text', 'text', 'float4', 'timestamptz'],
    )}`);
}

const logRow = z.object({
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
export type RequestLogRow = z.infer<typeof logRow>;

export async function listRequestLog(
  db: CommonQueryMethods,
  accountId: string,
  limit: number,
): Promise<readonly RequestLogRow[]> {
  return db.any(sql.type(logRow)`
    SELECT request_id, api_key_id, method, path, status_code, error_code, ip, duration_ms, created_at
    FROM api_request_log WHERE account_id = ${accountId}
    ORDER BY created_at DESC, id DESC LIMIT ${limit}`);
}
