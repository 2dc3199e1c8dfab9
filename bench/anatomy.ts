import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
import proto from '@temporalio/proto';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { startEmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { startMigratedPostgres } from '../src/dev/migrated-postgres.js';
import { freePort } from '../src/dev/free-port.js';
import { randomBase62 } from '../src/ids.js';
import { startBareWorker, startStack, type Stack } from './stack.js';
import { printColumns } from './support.js';

/**
 * npm run bench:anatomy — what one POST (bench:admit's) and one whole generation (bench:lifecycle's)
 * do, counted rather than timed: the workflow history events of ours and of the no-op shape it is
 * compared with, by event type, and every SQL statement PostgreSQL ran for them (pg_stat_statements,
 * top-level statements: round trips), per generation. Counts do not depend on the machine's load,
 * so this is where a CPU figure of bench:admit or bench:lifecycle is explained. BENCH_ANATOMY_N
 * generations of each (default 20), one at a time. Runs on the build with BENCH_RUNTIME=build.
 */
const n = Number(process.env.BENCH_ANATOMY_N ?? 20);

const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-anatomy-'));
await chmod(scratch, 0o755);
const dataDir = path.join(scratch, 'pg');
const port = await freePort();
// pg_stat_statements must be loaded at server start: set it, then start the server again.
const first = await startMigratedPostgres({ dataDir, port, database: 'bench', persistent: true });
await adminQuery(first.adminUrl, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
await first.stop();
const postgres = await startEmbeddedPostgres({ dataDir, port, database: 'bench', persistent: false });
await adminQuery(postgres.url, 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
process.env.DATABASE_URL = postgres.url;

try {
  await scenario('one POST /v1/generations → 202 (bench:admit)', 'admit', {
    SIM_PROVIDER_DELAY_MS: String(3_600_000),
    PROVIDER_POLL_INTERVAL_MS: '60000',
  });
  await scenario('one generation, POST to succeeded (bench:lifecycle)', 'lifecycle', {
    SIM_PROVIDER_DELAY_MS: '0',
    PROVIDER_POLL_INTERVAL_MS: '50',
  });
} finally {
  await postgres.stop();
  await rm(scratch, { recursive: true, force: true });
}

async function scenario(title: string, kind: 'admit' | 'lifecycle', env: NodeJS.ProcessEnv): Promise<void> {
  const stack = await startStack(env);
  const bare = await startBareWorker(stack.temporalAddress, `bare-${kind}`);
  const connection = await Connection.connect({ address: stack.temporalAddress });
  const client = new Client({ connection });
  const headers = { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' };
  try {
    // Warm-up (catalog caches, the renderer child, connections), not counted.
    for (let i = 0; i < 3; i++) await ours(stack, kind, headers);
    await settle();
    await stack.pool.query(sql.unsafe`SELECT pg_stat_statements_reset()`);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await ours(stack, kind, headers));
    await settle();
    const statements = await stack.pool.any(sql.type(
      z.object({ query: z.string(), calls: z.number(), rows: z.number(), ms: z.number() }),
    )`
      SELECT query, calls::int, rows::int, total_exec_time AS ms FROM pg_stat_statements
      WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC, total_exec_time DESC`);

    const shapeIds: string[] = [];
    for (let i = 0; i < n; i++) {
      const workflowId = `bare-${randomBase62(16)}`;
      await client.workflow.executeUpdateWithStart('admit', {
        startWorkflowOperation: new WithStartWorkflowOperation(
          kind === 'admit' ? 'noopAdmissionWorkflow' : 'noopLifecycleWorkflow',
          { workflowId, taskQueue: `bare-${kind}`, workflowIdConflictPolicy: 'USE_EXISTING' },
        ),
      });
      if (kind === 'lifecycle') await client.workflow.getHandle(workflowId).result();
      shapeIds.push(workflowId);
    }
    await settle();
    const workflowIds = await stack.pool.anyFirst(sql.type(z.object({ workflow_id: z.string() }))`
      SELECT workflow_id FROM generations WHERE id = ANY(${sql.array(ids, 'text')})`);
    // A generation's active run continues as its retention run once it succeeded (the thumbnails are a sweep's).
    if (kind === 'lifecycle') for (const id of workflowIds) await retentionRunStarted(client, id);
    const oursEvents = await eventsByType(client, workflowIds);
    const shapeEvents = await eventsByType(client, shapeIds);
    // BENCH_ANATOMY_DUMP=DIR: each run of one generation of each as JSON, to read event by event.
    const dump = process.env.BENCH_ANATOMY_DUMP;
    if (dump)
      for (const [side, id] of [
        ['ours', workflowIds[0]!],
        ['shape', shapeIds[0]!],
      ] as const)
        for (const [i, history] of (await chainOf(client, id)).entries())
          await writeFile(
            path.join(dump, `${kind}-${side}-run${i + 1}.json`),
            JSON.stringify(history, null, 1),
          );

    console.log(`\n${title}: ${n} of each, one at a time`);
    console.log(
      '\nworkflow history events per generation, by type, over every run of its workflow id (a succeeded generation: its active run, then the retention run it continued as; a POST: the active run, parked at the provider)',
    );
    const types = [...new Set([...shapeEvents.byType.keys(), ...oursEvents.byType.keys()])];
    printColumns(58, [
      ['', 'shape', 'ours'],
      ...types.map((type) => [
        type,
        ((shapeEvents.byType.get(type) ?? 0) / shapeIds.length).toFixed(1),
        ((oursEvents.byType.get(type) ?? 0) / workflowIds.length).toFixed(1),
      ]),
      ['all events', shapeEvents.events.toFixed(1), oursEvents.events.toFixed(1)],
      ['runs', shapeEvents.runs.toFixed(1), oursEvents.runs.toFixed(1)],
      ...oursEvents.perRun.map((events, i) => [
        `  events in run ${i + 1}${i === 0 ? ' (active)' : ''}`,
        (shapeEvents.perRun[i] ?? 0).toFixed(1),
        events.toFixed(1),
      ]),
      ['history bytes (encoded)', shapeEvents.bytes.toFixed(0), oursEvents.bytes.toFixed(0)],
    ]);

    console.log('\nSQL statements per generation (top-level: each a round trip), by statement');
    let calls = 0;
    let ms = 0;
    const rows: string[][] = [];
    for (const s of statements) {
      calls += s.calls;
      ms += s.ms;
      if (s.calls / n < 0.05) continue;
      rows.push([
        s.query.replace(/\s+/g, ' ').slice(0, 100),
        (s.calls / n).toFixed(2),
        (s.ms / s.calls).toFixed(3),
      ]);
    }
    printColumns(102, [['', 'per gen', 'ms each'], ...rows]);
    console.log(
      `all statements: ${(calls / n).toFixed(1)} per generation, ${(ms / n).toFixed(2)} ms of execution per generation`,
    );
  } finally {
    await connection.close();
    await bare.stop();
    await stack.stop();
  }
}

/** One of the bench's calls; returns the generation's id. */
async function ours(
  stack: Stack,
  kind: 'admit' | 'lifecycle',
  headers: Record<string, string>,
): Promise<string> {
  const created = await fetch(`${stack.apiUrl}/generations`, {
    method: 'POST',
    headers: { ...headers, 'idempotency-key': randomBase62(24) },
    body: JSON.stringify(
      kind === 'admit'
        ? { model: 'lumen-lite', prompt: `benchmark ${randomBase62(8)}` }
        : { model: 'prism-2', prompt: `lifecycle ${randomBase62(8)}`, resolution: '1K' },
    ),
  });
  if (created.status !== 202) throw new Error(`status ${created.status}: ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  if (kind === 'admit') return id;
  for (;;) {
    const { status } = (await (await fetch(`${stack.apiUrl}/generations/${id}`, { headers })).json()) as {
      status: string;
    };
    if (status === 'succeeded') return id;
    if (status !== 'queued') throw new Error(status);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Lets the last workflow tasks and the API's buffered writes (the request log) land. */
function settle(): Promise<void> {
  return new Promise((r) => setTimeout(r, 2_000));
}

/** Waits (up to 30 s) until the workflow id's newest run is its retention run. */
async function retentionRunStarted(client: Client, workflowId: string): Promise<void> {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const { type } = await client.workflow.getHandle(workflowId).describe();
    if (type === 'generationRetentionWorkflow') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${workflowId} did not continue as its retention run`);
}

/**
 * Every run of a workflow id, oldest first: a generation's active run continues as new into its
 * retention run, so the newest run alone is not the generation. Walked back from the newest through
 * each run's continuedExecutionRunId.
 */
async function chainOf(
  client: Client,
  workflowId: string,
): Promise<proto.temporal.api.history.v1.IHistory[]> {
  const runs: proto.temporal.api.history.v1.IHistory[] = [];
  let runId: string | null | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.unshift(history);
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
  }
  return runs;
}

async function eventsByType(
  client: Client,
  workflowIds: readonly string[],
): Promise<{ byType: Map<string, number>; events: number; bytes: number; runs: number; perRun: number[] }> {
  const byType = new Map<string, number>();
  let [events, bytes, runs] = [0, 0, 0];
  const perRun: number[] = [];
  for (const workflowId of workflowIds) {
    const chain = await chainOf(client, workflowId);
    runs += chain.length;
    for (const [i, history] of chain.entries()) {
      bytes += proto.temporal.api.history.v1.History.encode(history).finish().length;
      perRun[i] = (perRun[i] ?? 0) + (history.events?.length ?? 0);
      for (const event of history.events ?? []) countEvent(event);
    }
  }
  return {
    byType,
    events: events / workflowIds.length,
    bytes: bytes / workflowIds.length,
    runs: runs / workflowIds.length,
    perRun: perRun.map((n) => n / workflowIds.length),
  };

  function countEvent(event: proto.temporal.api.history.v1.IHistoryEvent): void {
    events++;
    const type = proto.temporal.api.enums.v1.EventType[event.eventType ?? 0] ?? String(event.eventType);
    const name = type.replace(/^EVENT_TYPE_/, '');
    const marker = event.markerRecordedEventAttributes?.markerName;
    const attributes = event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
    const activity = event.activityTaskScheduledEventAttributes?.activityType?.name;
    const detail = marker ?? activity ?? (attributes ? Object.keys(attributes).sort().join(', ') : undefined);
    const key = detail ? `${name} (${detail})` : name;
    byType.set(key, (byType.get(key) ?? 0) + 1);
  }
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
