import {
  createNumericTypeParser,
  createPool,
  SchemaValidationError,
  type DatabasePool,
  type Interceptor,
} from 'slonik';
import pg from 'pg';

export type { DatabasePool };

/** Timestamps leave the database as ISO 8601 strings with milliseconds and Z, the API's format. */
const isoTimestamp = (value: string) => new Date(value).toISOString();

/** int8 (bigint, count(*)) as a JS number: credits and counts stay far below 2^53, and a larger value is an error. */
const safeInteger = (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new RangeError(`int8 value ${value} is beyond Number.MAX_SAFE_INTEGER`);
  return n;
};

/**
 * Validates rows of `sql.type(schema)` queries against their zod schema. Each schema is a module
 * constant, never built in the function that queries: zod 4 compiles a schema on its first parse,
 * so a schema built per call cost 0.1–0.4 ms of CPU per statement (a hoisted one 0.2 µs), a few
 * milliseconds of every generation (test/db/row-schemas.test.ts keeps them hoisted).
 */
const resultParser: Interceptor = {
  name: 'result-parser',
  transformRow: (context, query, row) => {
    if (!context.resultParser) return row;
    const parsed = context.resultParser.safeParse(row);
    if (!parsed.success) throw new SchemaValidationError(query, row, parsed.error.issues);
    return parsed.data as typeof row;
  },
};

interface PoolOptions {
  maximumPoolSize?: number;
  statementTimeoutMs?: number;
}

export async function createDatabasePool(url: string, options: PoolOptions = {}): Promise<DatabasePool> {
  return createPool(url, {
    maximumPoolSize: options.maximumPoolSize ?? 10,
    statementTimeout: options.statementTimeoutMs ?? 30_000,
    connectionTimeout: 10_000,
    captureStackTrace: false,
    // No reset between checkouts. Slonik's default sends DISCARD ALL on every release: a round trip
    // per query, for session state we never leave on a pooled connection (LISTEN, SET and the
    // migration lock each use a dedicated client, and transactions end in COMMIT or ROLLBACK).
    // It must still be an async function: with none at all, @slonik/driver 47 marks a released
    // client "pending release" for good and its next query fails.
    resetConnection: async () => {},
    interceptors: [resultParser],
    typeParsers: [
      { name: 'int8', parse: safeInteger },
      createNumericTypeParser(),
      { name: 'timestamptz', parse: isoTimestamp },
      { name: 'timestamp', parse: (value) => isoTimestamp(`${value}Z`) },
    ],
  });
}

/** Connects once and asks `SELECT 1`: whether PostgreSQL at `url` takes our connections now. */
export async function probeDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Where a database URL points, for log lines: host:port/database, never the user or password. */
export function databaseTarget(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return '(unparsable DATABASE_URL)';
  }
}
