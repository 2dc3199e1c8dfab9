import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { createFundedAccount, type FundedAccount } from '../src/dev/funded-account.js';
import { randomBase62 } from '../src/vocabulary/ids.js';
import { rssKb } from './support.js';

/** The batch benches' settings: `-- --lines N` (or BENCH_BATCH_LINES), and `--history` where it applies. */
export function batchBenchArgs(defaultLines: number): { lines: number; history: boolean } {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { lines: { type: 'string' }, history: { type: 'boolean', default: false } },
    allowPositionals: false,
  });
  const lines = Number(values.lines ?? process.env.BENCH_BATCH_LINES ?? defaultLines);
  if (!Number.isInteger(lines) || lines < 1)
    throw new Error(`--lines must be a positive integer, not ${values.lines}`);
  return { lines, history: values.history };
}

/** An account of its own for one phase of a bench, with credits enough for any run. */
export const benchAccount = (db: CommonQueryMethods, label: string): Promise<FundedAccount> =>
  createFundedAccount(db, {
    email: `${label}-${randomBase62(6)}@example.test`,
    oneTime: 1_000_000_000,
    reason: 'bench',
  });

/**
 * A batch line as the benches send it: a 1K image on the simulator; with `seconds`, the simulator
 * takes that long over it (its `[sim:slow=S]` directive).
 */
export const benchLine = (label: string, i: number, seconds?: number) => ({
  custom_id: `${label}-${i}`,
  model: 'prism-2',
  prompt: `${label} line ${i}${seconds ? ` [sim:slow=${seconds}]` : ''}`,
  resolution: '1K',
});

export interface BatchView {
  id: string;
  status: string;
  request_counts: Record<string, number>;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
}

/** POST /v1/batches with `lines` as a JSONL body (as `gen batch` sends a file). */
export async function postJsonlBatch(
  api: { apiUrl: string },
  key: string,
  lines: readonly object[],
  idempotencyKey: string,
): Promise<BatchView> {
  for (;;) {
    const response = await fetch(`${api.apiUrl}/batches?completion_window=24h`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/x-ndjson',
        'idempotency-key': idempotencyKey,
      },
      body: lines.map((line) => JSON.stringify(line)).join('\n') + '\n',
    });
    if (response.status === 201 || response.status === 200) return (await response.json()) as BatchView;
    if (response.status !== 503)
      throw new Error(`POST /v1/batches: ${response.status} ${await response.text()}`);
  }
}

export async function getBatch(api: { apiUrl: string }, key: string, id: string): Promise<BatchView> {
  const response = await fetch(`${api.apiUrl}/batches/${id}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  if (response.status !== 200)
    throw new Error(`GET /v1/batches/${id}: ${response.status} ${await response.text()}`);
  return (await response.json()) as BatchView;
}

export const batchEnded = (batch: BatchView) => ['completed', 'canceled', 'expired'].includes(batch.status);

/** GET /v1/batches/{id} every `intervalMs` until it has ended (or `until` holds); its last view. */
export async function waitForBatch(
  api: { apiUrl: string },
  key: string,
  id: string,
  options: {
    intervalMs?: number;
    until?: (batch: BatchView) => boolean;
    progress?: (b: BatchView) => void;
  } = {},
): Promise<BatchView> {
  const until = options.until ?? batchEnded;
  let lastPrinted = Date.now();
  for (;;) {
    const batch = await getBatch(api, key, id);
    if (until(batch)) return batch;
    if (options.progress && Date.now() - lastPrinted >= 10_000) {
      options.progress(batch);
      lastPrinted = Date.now();
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 250));
  }
}

/** A batch's counts on one line: `succeeded 812, queued 10, pending 4178, …` (zeros left out). */
export const countsLine = (batch: BatchView) =>
  Object.entries(batch.request_counts)
    .filter(([name, n]) => name !== 'total' && n > 0)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');

/** Samples the resident memory of some processes every `everyMs` until stopped: first, peak and last (kB). */
export function sampleRss(
  pids: Record<string, number>,
  everyMs = 200,
): { stop(): Promise<Record<string, { firstKb: number; peakKb: number; lastKb: number }>> } {
  const seen: Record<string, { firstKb: number; peakKb: number; lastKb: number }> = {};
  const sample = async () => {
    for (const [name, pid] of Object.entries(pids)) {
      // A process that has exited (the stack stopping) has no resident memory: its last sample stands.
      const kb = await rssKb(pid).catch(() => undefined);
      if (kb === undefined) continue;
      const s = (seen[name] ??= { firstKb: kb, peakKb: kb, lastKb: kb });
      s.peakKb = Math.max(s.peakKb, kb);
      s.lastKb = kb;
    }
  };
  let running = sample();
  const timer = setInterval(() => {
    running = running.then(sample);
  }, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
      await sample();
      return seen;
    },
  };
}

export const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

const tableRow = z.object({ name: z.string() });
const countRow = z.object({ n: z.number() });

/** Rows in every table of the service's schema. */
export async function tableCounts(db: CommonQueryMethods): Promise<Map<string, number>> {
  const tables = await db.any(
    sql.type(
      tableRow,
    )`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`,
  );
  const counts = new Map<string, number>();
  for (const { name } of tables)
    counts.set(
      name,
      (await db.one(sql.type(countRow)`SELECT count(*)::int AS n FROM ${sql.identifier([name])}`)).n,
    );
  return counts;
}

/** The tables that grew between two counts, with by how much (largest first). */
export function rowsWritten(
  before: Map<string, number>,
  after: Map<string, number>,
): Array<[string, number]> {
  return [...after]
    .map(([name, n]): [string, number] => [name, n - (before.get(name) ?? 0)])
    .filter(([, n]) => n !== 0)
    .sort((a, b) => b[1] - a[1]);
}

export interface RunHistory {
  runId: string;
  events: number;
  bytes: number;
}

/**
 * Every run of a workflow id, oldest first, with its event count and encoded history size: walked
 * back from the newest run through each run's continuedExecutionRunId.
 */
export async function historyRuns(client: Client, workflowId: string): Promise<RunHistory[]> {
  const runs: RunHistory[] = [];
  let runId: string | null | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.unshift({
      runId,
      events: history.events?.length ?? 0,
      bytes: proto.temporal.api.history.v1.History.encode(history).finish().length,
    });
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
  }
  return runs;
}

/** Prints a workflow's runs (each run's events and bytes, and the largest) as bench:batch-history shows them. */
export function printHistory(workflowId: string, lines: number, runs: RunHistory[]): void {
  const total = runs.reduce(
    (sum, run) => ({ events: sum.events + run.events, bytes: sum.bytes + run.bytes }),
    {
      events: 0,
      bytes: 0,
    },
  );
  const largest = runs.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  console.log(`\nhistory of the ${lines}-line batch's workflow (${workflowId}): ${runs.length} run(s)`);
  for (const [i, run] of runs.entries())
    console.log(
      `  run ${String(i + 1).padStart(3)}  ${String(run.events).padStart(6)} events  ${(run.bytes / 1024).toFixed(1).padStart(8)} KiB`,
    );
  console.log(
    `  largest run: ${largest.events} events, ${(largest.bytes / 1024).toFixed(1)} KiB; all runs: ${total.events} events, ${(total.bytes / 1024).toFixed(1)} KiB`,
  );
}

/** The workflow id of a batch (the batch's row). */
export async function batchWorkflowIdOf(db: CommonQueryMethods, batchId: string): Promise<string> {
  return db.oneFirst(
    sql.type(z.object({ workflow_id: z.string() }))`SELECT workflow_id FROM batches WHERE id = ${batchId}`,
  );
}
