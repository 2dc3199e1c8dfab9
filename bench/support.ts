import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { migrate } from '../src/admin/migrate.js';
import { freePort } from '../src/dev/free-port.js';
import { startMigratedPostgres } from '../src/dev/migrated-postgres.js';
import { postmasterPid } from './process-cpu.js';

/**
 * DATABASE_URL if set, else a throw-away embedded PostgreSQL; migrated either way. `pid` is the
 * embedded server's postmaster (its backends are its children), undefined for an external one.
 */
export async function benchDatabase(): Promise<{
  url: string;
  embedded: boolean;
  pid: number | undefined;
  stop(): Promise<void>;
}> {
  if (process.env.DATABASE_URL) {
    await migrate(process.env.DATABASE_URL);
    return { url: process.env.DATABASE_URL, embedded: false, pid: undefined, stop: () => Promise.resolve() };
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-pg-'));
  await chmod(dir, 0o755); // run as root, PostgreSQL runs as `postgres` and must reach its data here
  const postgres = await startMigratedPostgres({
    dataDir: path.join(dir, 'pg'),
    port: await freePort(),
    database: 'bench',
    persistent: false,
  });
  return {
    url: postgres.url,
    embedded: true,
    pid: await postmasterPid(path.join(dir, 'pg')),
    async stop() {
      await postgres.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface LoadResult {
  label: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
}

/** One autocannon run on loopback. */
export async function load(label: string, options: autocannon.Options): Promise<LoadResult> {
  const result = await autocannon(options);
  return {
    label,
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** The median run of several (by requests/s), so one noisy run on a shared machine does not decide. */
export function medianRun<T extends LoadResult>(runs: T[]): T {
  const sorted = [...runs].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** A plain text table: the first column left-aligned at `firstWidth`, the others right-aligned. */
export function printColumns(firstWidth: number, rows: string[][]): void {
  for (const cells of rows)
    console.log(cells.map((c, i) => (i === 0 ? c.padEnd(firstWidth) : c.padStart(11))).join(''));
}

export function printTable<T extends LoadResult>(rows: T[], extra: Array<keyof T & string> = []): void {
  printColumns(36, [
    ['route', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', ...extra],
    ...rows.map((r) => [
      r.label,
      r.requestsPerSecond.toFixed(0),
      r.p50.toFixed(2),
      r.p99.toFixed(2),
      String(r.non2xx),
      String(r.errors),
      ...extra.map((key) => String(r[key])),
    ]),
  ]);
}

/** The p-th percentile (nearest rank) of `values`; NaN for none. */
export const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
};

/** Resident memory (kB) of a process. */
export async function rssKb(pid: number): Promise<number> {
  return Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]);
}

/** Keeps a bench's Idempotency-Keys apart from an earlier run's on the same database. */
const runId = Date.now().toString(36);

/**
 * Creates `count` generations (the i-th's body is `body(i)`) five at a time, as a few clients at
 * once would; a 503 (a loaded machine) is retried with the same key and body. Their ids, in order.
 */
export async function createGenerations(
  api: { apiUrl: string; key: string },
  label: string,
  count: number,
  body: (i: number) => object,
): Promise<string[]> {
  const create = async (i: number): Promise<string> => {
    const json = JSON.stringify(body(i));
    for (;;) {
      const response = await fetch(`${api.apiUrl}/generations`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${api.key}`,
          'content-type': 'application/json',
          'idempotency-key': `${runId}-${label}-${i}`,
        },
        body: json,
      });
      if (response.status === 202) return ((await response.json()) as { id: string }).id;
      if (response.status !== 503) throw new Error(`POST: ${response.status} ${await response.text()}`);
    }
  };
  const ids: string[] = [];
  for (let i = 0; i < count; i += 5)
    ids.push(...(await Promise.all([0, 1, 2, 3, 4].filter((j) => i + j < count).map((j) => create(i + j)))));
  return ids;
}
