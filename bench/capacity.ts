import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { sql } from 'slonik';
import { z } from 'zod';
import { randomBase62 } from '../src/vocabulary/ids.js';
import { printColumns } from './support.js';
import { startStack } from './stack.js';

/**
 * npm run bench:capacity — what one generation costs Temporal and PostgreSQL, measured on the
 * real stack (embedded PostgreSQL, the Temporal dev server keeping its state in a SQLite file,
 * our API and worker as processes), and what that comes to at 1, 10 and 100 generations per
 * second. docs/capacity.md quotes its figures.
 *
 * BENCH_GENERATIONS (100) generations of a 1K image, each with an Idempotency-Key, by
 * BENCH_CLIENTS (10) clients that poll every 500 ms; each key is replayed once after success.
 * Retention is shortened (BENCH_RESULT_RETENTION_MS, 120 s; the key horizon BENCH_KEY_HORIZON_MS,
 * twice that) so that every story runs to its end; the projection uses the production ones.
 * The projection's assumptions: BENCH_REQUESTS_PER_GENERATION (8: a POST and polls every 2.5 s
 * for an image's ~15 s, plus a list call), BENCH_RESULT_MB (2: one stored image), and
 * BENCH_NAMESPACE_RETENTION_DAYS (7: how long Temporal keeps a closed workflow).
 */
const total = Number(process.env.BENCH_GENERATIONS ?? 100);
const clients = Number(process.env.BENCH_CLIENTS ?? 10);
const retentionMs = Number(process.env.BENCH_RESULT_RETENTION_MS ?? 120_000);
const horizonMs = Number(process.env.BENCH_KEY_HORIZON_MS ?? 2 * retentionMs);
const requestsPerGeneration = Number(process.env.BENCH_REQUESTS_PER_GENERATION ?? 8);
const resultBytes = Number(process.env.BENCH_RESULT_MB ?? 2) * 1e6;
const namespaceRetentionDays = Number(process.env.BENCH_NAMESPACE_RETENTION_DAYS ?? 7);
const pollMs = 500;
const DAY_S = 86_400;

const run = promisify(execFile);
const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-capacity-'));
await chmod(scratch, 0o755);
const temporalDbFile = path.join(scratch, 'temporal.db');
const stack = await startStack(
  {
    SIM_PROVIDER_DELAY_MS: '0',
    PROVIDER_POLL_INTERVAL_MS: '50',
    RESULT_RETENTION_MS: String(retentionMs),
    IDEMPOTENCY_RETENTION_MS: String(horizonMs),
  },
  { temporalDbFile },
);
const connection = await Connection.connect({ address: stack.temporalAddress });
const client = new Client({ connection });
const headers = { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' };
const tag = randomBase62(6);
const bodyOf = (i: number) => ({ model: 'prism-2', prompt: `capacity ${tag} ${i}`, resolution: '1K' });
const keyOf = (i: number) => `capacity-${tag}-${i}`;
let requests = 0;

try {
  const pg0 = await postgresTables();
  const t0 = await temporalTables();

  // 1. Every generation from its POST to succeeded, polled like a client would.
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) {
        const i = next++;
        // A 503 (admission slower than ADMISSION_TIMEOUT_MS on a busy machine) is retried, as the spec says.
        let { status, body } = await post(i);
        for (let retry = 0; status === 503 && retry < 5; retry++) ({ status, body } = await post(i));
        if (status !== 202) throw new Error(`POST answered ${status}`);
        ids[i] = body.id as string;
        let current = body;
        while (current.status === 'queued') {
          await sleep(pollMs);
          current = await get(`/generations/${ids[i]}`);
        }
        if (current.status !== 'succeeded') throw new Error(`generation ${ids[i]} ${String(current.status)}`);
      }
    }),
  );
  const requestsToSucceed = requests;
  await sleep(2_000); // the request log is written in batches, once a second
  const parked = {
    pg: await postgresTables(),
    temporal: await temporalTables(),
    // Those whose results are still kept (a slow machine may have taken longer than the retention).
    histories: await histories(ids, { kept: true }),
    open: await openGenerationWorkflows(),
    stored: await folderBytes(String(stack.env.STORAGE_DIR)),
  };

  // 2. A replay of each key while the results are kept: what a repeat costs.
  const replayStarted = performance.now();
  for (let i = 0; i < total; i++) {
    const { status, body } = await post(i);
    if (status !== 202 || body.id !== ids[i])
      throw new Error(`replay ${i} answered ${status} ${String(body.id)}`);
  }
  const replayMs = (performance.now() - replayStarted) / total;
  const replayHistories = await histories([...parked.histories.eventsOf.keys()], { kept: true });

  // 3. Content expiry, then the key horizon: the whole story.
  await until(`content expiry`, retentionMs + 60_000, async () => (await expiredCount()) === total);
  const openAfterExpiry = await openGenerationWorkflows();
  await until('every generation workflow closed', horizonMs + 60_000, async () => {
    return (await openGenerationWorkflows()) === 0;
  });
  await sleep(2_000);
  const done = {
    pg: await postgresTables(),
    temporal: await temporalTables(),
    histories: await histories(ids),
  };

  report({
    parked,
    done,
    pg0,
    t0,
    replayHistories,
    replayMs,
    openAfterExpiry,
    requestsToSucceed,
  });
} finally {
  await connection.close();
  await stack.stop();
  await rm(scratch, { recursive: true, force: true });
}

interface TableFigures {
  rows: number;
  /** pg_total_relation_size: heap, indexes and TOAST, dead row versions included. */
  bytes: number;
  /** The live rows' own size (pg_column_size of each row). */
  rowBytes: number;
  indexBytes: number;
}

async function postgresTables(): Promise<Map<string, TableFigures>> {
  const tables = await stack.pool.anyFirst(sql.type(z.object({ relname: z.string() }))`
    SELECT relname FROM pg_stat_user_tables WHERE schemaname = 'public' ORDER BY relname`);
  const figures = new Map<string, TableFigures>();
  for (const table of tables) {
    const row = await stack.pool.one(sql.type(
      z.object({ rows: z.number(), bytes: z.number(), row_bytes: z.number(), index_bytes: z.number() }),
    )`
      SELECT count(*)::float8 AS rows,
             pg_total_relation_size(${table}::regclass)::float8 AS bytes,
             coalesce(sum(pg_column_size(t.*)), 0)::float8 AS row_bytes,
             pg_indexes_size(${table}::regclass)::float8 AS index_bytes
      FROM ${sql.identifier([table])} t`);
    figures.set(table, {
      rows: row.rows,
      bytes: row.bytes,
      rowBytes: row.row_bytes,
      indexBytes: row.index_bytes,
    });
  }
  return figures;
}

/**
 * Bytes each table of Temporal's SQLite file holds (indexes included, from SQLite's dbstat) and its
 * rows: histories, mutable state, timers and visibility, as the dev server stores them.
 */
async function temporalTables(): Promise<Map<string, { rows: number; bytes: number }>> {
  const script = `
import json, sqlite3, sys
db = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)
owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"))
out = {}
for name, size in db.execute('SELECT name, sum(pgsize) FROM dbstat GROUP BY name'):
    table = owner.get(name, name)
    out.setdefault(table, {'rows': 0, 'bytes': 0})['bytes'] += size
for table in out:
    if table in owner and owner[table] == table and not table.startswith('sqlite_'):
        out[table]['rows'] = db.execute('SELECT count(*) FROM "%s"' % table).fetchone()[0]
print(json.dumps(out))`;
  const { stdout } = await run('python3', ['-c', script, temporalDbFile], { maxBuffer: 16 << 20 });
  return new Map(Object.entries(JSON.parse(stdout) as Record<string, { rows: number; bytes: number }>));
}

interface HistoryFigures {
  /** Generations measured. */
  n: number;
  events: number;
  bytes: number;
  byType: Map<string, number>;
  upserts: number;
  /** Each measured generation's event count. */
  eventsOf: Map<string, number>;
}

/**
 * The generations' workflow histories (the latest run of each one's workflow id): events and
 * encoded bytes, averaged per generation. `kept`: only those whose results are not expired yet.
 */
async function histories(generationIds: string[], only: { kept?: boolean } = {}): Promise<HistoryFigures> {
  const rows = await stack.pool.any(sql.type(z.object({ id: z.string(), workflow_id: z.string() }))`
    SELECT id, workflow_id FROM generations
    WHERE id = ANY(${sql.array(generationIds, 'text')}) AND (NOT content_expired OR NOT ${only.kept ?? false})`);
  const byType = new Map<string, number>();
  const eventsOf = new Map<string, number>();
  let [events, bytes] = [0, 0];
  for (const row of rows) {
    const history = await client.workflow.getHandle(row.workflow_id).fetchHistory();
    bytes += proto.temporal.api.history.v1.History.encode(history).finish().length;
    eventsOf.set(row.id, history.events?.length ?? 0);
    for (const event of history.events ?? []) {
      events++;
      const type = proto.temporal.api.enums.v1.EventType[event.eventType ?? 0] ?? String(event.eventType);
      byType.set(type, (byType.get(type) ?? 0) + 1);
    }
  }
  const n = rows.length;
  return {
    n,
    events: events / n,
    bytes: bytes / n,
    byType: new Map([...byType].map(([type, count]) => [type, count / n])),
    upserts: (byType.get('EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES') ?? 0) / n,
    eventsOf,
  };
}

function openGenerationWorkflows(): Promise<number> {
  return client.workflow
    .count(
      `WorkflowType = 'generationWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = '${String(stack.env.TEMPORAL_TASK_QUEUE)}'`,
    )
    .then((c) => c.count);
}

function expiredCount(): Promise<number> {
  return stack.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    SELECT count(*)::int AS n FROM generations WHERE content_expired`);
}

async function folderBytes(dir: string): Promise<{ files: number; bytes: number }> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  let [files, bytes] = [0, 0];
  for (const entry of entries.filter((e) => e.isFile())) {
    files++;
    bytes += (await stat(path.join(entry.parentPath, entry.name))).size;
  }
  return { files, bytes };
}

async function post(i: number): Promise<{ status: number; body: Record<string, unknown> }> {
  requests++;
  const response = await fetch(`${stack.apiUrl}/generations`, {
    method: 'POST',
    headers: { ...headers, 'idempotency-key': keyOf(i) },
    body: JSON.stringify(bodyOf(i)),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function get(route: string): Promise<Record<string, unknown>> {
  requests++;
  return (await (await fetch(`${stack.apiUrl}${route}`, { headers })).json()) as Record<string, unknown>;
}

async function until(what: string, timeoutMs: number, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(1_000);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function report(m: {
  parked: {
    pg: Map<string, TableFigures>;
    temporal: Map<string, { rows: number; bytes: number }>;
    histories: HistoryFigures;
    open: number;
    stored: { files: number; bytes: number };
  };
  done: {
    pg: Map<string, TableFigures>;
    temporal: Map<string, { rows: number; bytes: number }>;
    histories: HistoryFigures;
  };
  pg0: Map<string, TableFigures>;
  t0: Map<string, { rows: number; bytes: number }>;
  replayHistories: HistoryFigures;
  replayMs: number;
  openAfterExpiry: number;
  requestsToSucceed: number;
}): void {
  const n = total;
  const kb = (bytes: number) => (bytes / 1024).toFixed(2);
  const holdsToHorizon = m.openAfterExpiry > 0;
  console.log(
    `\n${n} generations (prism-2, 1K PNG), each with an Idempotency-Key; ${m.requestsToSucceed} requests to see them succeed, then ${n} replays`,
  );
  console.log(
    `open generation workflows: ${m.parked.open} while results are kept, ${m.openAfterExpiry} after content expiry (${holdsToHorizon ? 'each holds its key until the horizon' : 'each ends after content expiry'}), 0 after the horizon`,
  );

  console.log('\nTemporal history per generation (events, encoded bytes)');
  printColumns(46, [
    ['', 'events', 'bytes'],
    [
      `parked on the expiry timer (${m.parked.histories.n})`,
      m.parked.histories.events.toFixed(1),
      m.parked.histories.bytes.toFixed(0),
    ],
    [
      `after one replay (${m.replayHistories.n})`,
      m.replayHistories.events.toFixed(1),
      m.replayHistories.bytes.toFixed(0),
    ],
    ['whole story (closed)', m.done.histories.events.toFixed(1), m.done.histories.bytes.toFixed(0)],
  ]);
  const replayEvents =
    [...m.replayHistories.eventsOf].reduce(
      (sum, [id, n]) => sum + n - m.parked.histories.eventsOf.get(id)!,
      0,
    ) / m.replayHistories.n;
  console.log(
    `a replay added ${replayEvents.toFixed(1)} events and took ${m.replayMs.toFixed(1)} ms; visibility writes per generation: start, ${m.done.histories.upserts.toFixed(1)} search-attribute upserts, close`,
  );
  console.log('events by type (whole story):');
  for (const [type, count] of [...m.done.histories.byType].sort((a, b) => b[1] - a[1]))
    console.log(
      `  ${type.replace('EVENT_TYPE_', '').toLowerCase().padEnd(44)}${count.toFixed(1).padStart(6)}`,
    );

  console.log(
    "\nTemporal's SQLite store, per generation (KB; tables that changed): parked / closed, within retention",
  );
  const temporalRows: string[][] = [['table', 'rows', 'KB parked', 'rows', 'KB closed']];
  let [parkedTotal, closedTotal] = [0, 0];
  for (const table of new Set([...m.parked.temporal.keys(), ...m.done.temporal.keys()])) {
    const base = m.t0.get(table) ?? { rows: 0, bytes: 0 };
    const p = m.parked.temporal.get(table) ?? base;
    const d = m.done.temporal.get(table) ?? base;
    if (p.bytes === base.bytes && d.bytes === base.bytes && p.rows === base.rows && d.rows === base.rows)
      continue;
    parkedTotal += p.bytes - base.bytes;
    closedTotal += d.bytes - base.bytes;
    temporalRows.push([
      table,
      ((p.rows - base.rows) / n).toFixed(2),
      kb((p.bytes - base.bytes) / n),
      ((d.rows - base.rows) / n).toFixed(2),
      kb((d.bytes - base.bytes) / n),
    ]);
  }
  temporalRows.push(['total', '', kb(parkedTotal / n), '', kb(closedTotal / n)]);
  printColumns(30, temporalRows);
  const visibility = m.done.temporal.get('executions_visibility');
  const visibilityRows = visibility
    ? (visibility.rows - (m.t0.get('executions_visibility')?.rows ?? 0)) / n
    : 1;

  console.log('\nPostgreSQL per generation after the whole story (request log per request)');
  const pgRows: string[][] = [['table', 'rows', 'row bytes', 'index B', 'on disk B']];
  let generationBytes = 0;
  let generationRowBytes = 0;
  let logPerRequest = { rows: 0, bytes: 0, rowBytes: 0 };
  for (const [table, after] of m.done.pg) {
    const before = m.pg0.get(table)!;
    const rows = after.rows - before.rows;
    const bytes = after.bytes - before.bytes;
    if (rows === 0 && bytes === 0) continue;
    const perRow = (value: number) => (after.rows > 0 ? (value / after.rows).toFixed(0) : '-');
    if (table === 'api_request_log') {
      logPerRequest = { rows: rows / requests, bytes: bytes / rows, rowBytes: after.rowBytes / after.rows };
      pgRows.push([
        `${table} (per request)`,
        (rows / requests).toFixed(2),
        perRow(after.rowBytes),
        perRow(after.indexBytes),
        (bytes / rows).toFixed(0),
      ]);
      continue;
    }
    generationBytes += bytes / n;
    generationRowBytes += (after.rowBytes - before.rowBytes) / n;
    pgRows.push([
      table,
      (rows / n).toFixed(2),
      perRow(after.rowBytes),
      perRow(after.indexBytes),
      (bytes / n).toFixed(0),
    ]);
  }
  printColumns(34, pgRows);
  const parkedGallery = m.parked.pg.get('gallery_images')!.rows - m.pg0.get('gallery_images')!.rows;
  console.log(
    `per generation: ${generationRowBytes.toFixed(0)} B of live rows, ${generationBytes.toFixed(0)} B on disk (indexes and not yet vacuumed row versions included); gallery rows while results are kept: ${(parkedGallery / n).toFixed(2)}`,
  );
  console.log(
    `request log: ${logPerRequest.rowBytes.toFixed(0)} B per row, ${logPerRequest.bytes.toFixed(0)} B on disk per request (${requests} requests logged)`,
  );
  console.log(
    `stored results: ${(m.parked.stored.bytes / m.parked.stored.files / 1024).toFixed(1)} KB per simulated 1K PNG (${m.parked.stored.files} files)`,
  );

  // The projection, with the production retention (30 days of results, a 180-day key horizon).
  const resultDays = 30;
  const keyDays = 180;
  const residenceDays = holdsToHorizon ? keyDays : resultDays;
  const parkedBytes = parkedTotal / n;
  const closedBytes = closedTotal / n;
  console.log(
    `\nProjection (production retention: results ${resultDays} d, keys ${keyDays} d; a workflow stays open ${residenceDays} d; Temporal keeps a closed one ${namespaceRetentionDays} d; ${requestsPerGeneration} requests and ${(resultBytes / 1e6).toFixed(1)} MB of results per generation)`,
  );
  const gb = (bytes: number) => (bytes / 1e9).toFixed(1);
  const millions = (count: number) => (count / 1e6).toFixed(1);
  printColumns(46, [
    ['generations per second', '1', '10', '100'],
    ...[
      ['Temporal: open workflows (M)', (r: number) => millions(r * residenceDays * DAY_S)],
      [
        'Temporal: visibility rows (M)',
        (r: number) => millions(r * (residenceDays + namespaceRetentionDays) * DAY_S * visibilityRows),
      ],
      [
        'Temporal: stored (GB)',
        (r: number) => gb(r * DAY_S * (residenceDays * parkedBytes + namespaceRetentionDays * closedBytes)),
      ],
      ['PostgreSQL: generation rows (GB/day)', (r: number) => gb(r * DAY_S * generationBytes)],
      [
        'PostgreSQL: request log (GB/day)',
        (r: number) => gb(r * DAY_S * requestsPerGeneration * logPerRequest.bytes),
      ],
      [
        'Storage: results kept (TB)',
        (r: number) => ((r * DAY_S * resultDays * resultBytes) / 1e12).toFixed(1),
      ],
    ].map(([label, f]) => [label as string, ...[1, 10, 100].map((r) => (f as (r: number) => string)(r))]),
  ]);
}
