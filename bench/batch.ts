import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { sql } from 'slonik';
import { z } from 'zod';
import {
  batchBenchArgs,
  batchWorkflowIdOf,
  benchAccount,
  benchLine,
  countsLine,
  historyRuns,
  mb,
  postJsonlBatch,
  printHistory,
  rowsWritten,
  sampleRss,
  tableCounts,
  waitForBatch,
  type BatchView,
} from './batch-support.js';
import { startStack, type Stack } from './stack.js';
import { printColumns, rssKb } from './support.js';
import { loadAverage, printTargets } from './targets.js';

/**
 * npm run bench:batch [-- --lines N] [-- --history] — N lines (default 10,000) on the simulator
 * (no delay), as one batch (a JSONL body, then GET /v1/batches/{id} every 250 ms until it has
 * ended) against the same N sent as single POST /v1/generations by BENCH_CLIENTS (20) concurrent
 * clients (each with an Idempotency-Key; a 429 is waited out for its Retry-After, a 503 retried;
 * done when all N generations have ended, as the database says). Each phase has an account of its
 * own, and each runs on a stack of its own, started for it after a warm-up (see onFreshStack).
 * Prints time to finish, lines per second, the API's and worker's resident memory (sampled every
 * 200 ms: at the phase's start and its peak), and the rows each phase left in each table. A batch
 * of N/10 lines runs first, to show the API's memory does not grow with the batch's size.
 * The per-key limits are raised for the run (RATE_LIMIT_PER_MINUTE and
 * CONCURRENT_GENERATIONS_PER_ACCOUNT, as every bench stack does), so the POSTs are limited by the
 * service, not by a quota; the batch runs with the service's batch settings unless the
 * environment sets BATCH_LINES_IN_FLIGHT, BATCH_POLL_INTERVAL_MS or BATCH_SLICE_MS.
 * Both print the big batch workflow's runs and their history sizes. `--history` (bench:batch-history,
 * 50,000 lines) runs the one batch alone, no POSTs: with BATCH_SLICE_MS short, its workflow
 * continues as new many times, to show each run's history bounded whatever the batch's size.
 */
const { lines, history } = batchBenchArgs(10_000);
const clients = Number(process.env.BENCH_CLIENTS ?? 20);
/** bench:batch-history only: each line takes this long at the simulator (BENCH_LINE_SECONDS; none by default). */
const lineSeconds =
  history && process.env.BENCH_LINE_SECONDS ? Number(process.env.BENCH_LINE_SECONDS) : undefined;
const smallLines = Math.max(10, Math.round(lines / 10));
// bench:batch-history's batch runs as fast as this machine lets it, in short slices (each slice
// adds a few events to its workflow's history: short ones reach the continue-as-new threshold soon).
const historyDefaults: Record<string, string> = history
  ? { BATCH_LINES_IN_FLIGHT: '40', BATCH_POLL_INTERVAL_MS: '100', BATCH_SLICE_MS: '200' }
  : {};
const batchEnv = Object.fromEntries(
  ['BATCH_LINES_IN_FLIGHT', 'BATCH_POLL_INTERVAL_MS', 'BATCH_SLICE_MS'].map((name) => [
    name,
    process.env[name] ?? historyDefaults[name] ?? '(default)',
  ]),
);

/** The load average now, for progress lines. */
const loadNow = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const endedRow = z.object({ ended: z.number(), total: z.number() });
const outcomeRow = z.object({ status: z.string(), n: z.number() });

interface Phase {
  label: string;
  seconds: number;
  memory: Record<string, { firstKb: number; peakKb: number; lastKb: number }>;
  rows: Array<[string, number]>;
  note: string;
}

const stackEnv = {
  SIM_PROVIDER_DELAY_MS: '0',
  PROVIDER_POLL_INTERVAL_MS: '50',
  ...Object.fromEntries(Object.entries(batchEnv).filter(([, value]) => value !== '(default)')),
};
const loadBefore = await loadAverage();
console.log(
  `bench:batch: ${lines} lines, ${clients} POST clients; batch settings ${JSON.stringify(batchEnv)}; load average ${loadBefore}`,
);
if (history) {
  // bench:batch-history: the one batch alone, and its workflow's runs. Temporal keeps its state in a
  // SQLite file here, not in memory: the dev server's in-memory store grew past 20 GB near 30,000
  // lines (twice), and a file outlives a server that exits (read it with sqlite3: history_node).
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-history-'));
  const temporalDbFile = path.join(scratch, 'temporal.db');
  let finished = false;
  await onFreshStack(
    async (stack, client) => {
      // Its history so far, every BENCH_HISTORY_EVERY_S (300) seconds: a long run shows its runs as it goes.
      const everyMs = Number(process.env.BENCH_HISTORY_EVERY_S ?? 300) * 1000;
      let [shownAt, showing] = [Date.now(), false];
      const showHistory = async (batch: BatchView) => {
        if (showing || Date.now() - shownAt < everyMs) return;
        showing = true;
        try {
          const runs = await historyRuns(client, await batchWorkflowIdOf(stack.pool, batch.id));
          const largest = Math.max(...runs.map((run) => run.events));
          const temporalKb = await rssKb(stack.processes.temporal.pid ?? 0).catch(() => 0);
          console.log(
            `  history so far: ${runs.length} run(s), the largest ${largest} events; Temporal dev server RSS ${mb(temporalKb)}`,
          );
        } finally {
          [shownAt, showing] = [Date.now(), false];
        }
      };
      const only = await runBatch(
        stack,
        'batch',
        lines,
        (batch) => void showHistory(batch).catch(() => undefined),
      );
      console.log(`batch: ${only.phase.note}; API RSS peak ${mb(only.phase.memory.api!.peakKb)}`);
      printHistory(only.workflowId, lines, await historyRuns(client, only.workflowId));
      finished = true;
    },
    { temporalDbFile },
  ).finally(async () => {
    if (finished) await rm(scratch, { recursive: true, force: true });
    else console.log(`Temporal's store is kept in ${temporalDbFile}`);
  });
} else await compare();
console.log(`load average (1, 5, 15 min): ${loadBefore} at the start, ${await loadAverage()} at the end`);

/**
 * `run` on a stack started for it alone (after a warm-up of a few lines of each kind, so that no
 * phase pays for the first compilation of its code), stopped after. Each measured phase gets its
 * own: on one stack, whichever phase ran second was 15–25% slower, in either order (the Temporal
 * dev server's in-memory store grows with every workflow), which would decide the comparison.
 */
async function onFreshStack<T>(
  run: (stack: Stack, client: Client) => Promise<T>,
  options: Parameters<typeof startStack>[1] = {},
): Promise<T> {
  const stack = await startStack(stackEnv, options);
  const connection = await Connection.connect({ address: stack.temporalAddress });
  try {
    await runBatch(stack, 'warm', 20);
    await runPosts(stack, 'warm-posts', 20);
    return await run(stack, new Client({ connection }));
  } finally {
    await connection.close();
    await stack.stop();
  }
}

/** The batch against the POSTs, and the small batch against the big one, each on a stack of its own. */
async function compare(): Promise<void> {
  const small = await onFreshStack((stack) => runBatch(stack, 'batch-small', smallLines));
  const posts = await onFreshStack((stack) => runPosts(stack, 'posts', lines));
  const big = await onFreshStack(async (stack, client) => {
    const ran = await runBatch(stack, 'batch', lines);
    return { ...ran, runs: await historyRuns(client, ran.workflowId) };
  });
  const phases = [small.phase, posts, big.phase];

  console.log(
    `\n${'phase'.padEnd(34)}${'lines'.padStart(11)}${'seconds'.padStart(11)}${'lines/s'.padStart(11)}${'API RSS'.padStart(22)}${'worker RSS'.padStart(22)}`,
  );
  for (const [phase, n] of [
    [small.phase, smallLines],
    [posts, lines],
    [big.phase, lines],
  ] as const)
    console.log(
      `${phase.label.padEnd(34)}${String(n).padStart(11)}${phase.seconds.toFixed(1).padStart(11)}${(n / phase.seconds).toFixed(1).padStart(11)}` +
        `${`${mb(phase.memory.api!.firstKb)} → ${mb(phase.memory.api!.peakKb)}`.padStart(22)}` +
        `${`${mb(phase.memory.worker!.firstKb)} → ${mb(phase.memory.worker!.peakKb)}`.padStart(22)}`,
    );
  console.log('(RSS: at the phase start → peak during it, sampled every 200 ms)');
  for (const phase of phases) console.log(`  ${phase.label}: ${phase.note}`);

  console.log('\nrows written per phase (tables that changed):');
  const tables = [...new Set(phases.flatMap((p) => p.rows.map(([name]) => name)))];
  const byPhase = phases.map((p) => new Map(p.rows));
  printColumns(28, [
    ['table', ...phases.map((p) => p.label.slice(0, 11))],
    ...tables.map((name) => [name, ...byPhase.map((rows) => String(rows.get(name) ?? 0))]),
  ]);

  printHistory(big.workflowId, lines, big.runs);

  const apiGrowth = (phase: Phase) => phase.memory.api!.peakKb - phase.memory.api!.firstKb;
  printTargets('targets:', [
    {
      label: 'batch lines per second / single POSTs per second',
      value: posts.seconds / big.phase.seconds,
      kind: 'min',
      target: 1,
      unit: 'ratio',
      detail: `${(lines / big.phase.seconds).toFixed(1)} / ${(lines / posts.seconds).toFixed(1)} per s`,
    },
    {
      label: `API RSS growth during the ${lines}-line batch − during the ${smallLines}-line batch`,
      value: (apiGrowth(big.phase) - apiGrowth(small.phase)) / 1024,
      kind: 'max',
      target: 32,
      unit: 'MB',
      detail: `${mb(apiGrowth(big.phase))} vs ${mb(apiGrowth(small.phase))}; peaks ${mb(big.phase.memory.api!.peakKb)} vs ${mb(small.phase.memory.api!.peakKb)}`,
    },
  ]);
}

/** One batch of `n` lines, from the POST to its end. */
async function runBatch(
  stack: Stack,
  label: string,
  n: number,
  watch?: (batch: BatchView) => void,
): Promise<{ phase: Phase; workflowId: string }> {
  const account = await benchAccount(stack.pool, label);
  const before = await tableCounts(stack.pool);
  const memory = sampleRss({ api: stack.apiPid, worker: stack.workerPid });
  const started = performance.now();
  const created = await postJsonlBatch(
    stack,
    account.key,
    Array.from({ length: n }, (_, i) => benchLine(label, i, lineSeconds)),
    `${label}-${Date.now()}`,
  );
  const posted = performance.now();
  const done = await waitForBatch(stack, account.key, created.id, {
    progress: (b) => {
      console.log(`  ${label}: ${countsLine(b)} (load ${loadNow()})`);
      watch?.(b);
    },
  });
  const seconds = (performance.now() - started) / 1000;
  const phase: Phase = {
    label,
    seconds,
    memory: await memory.stop(),
    rows: rowsWritten(before, await tableCounts(stack.pool)),
    note: `batch ${done.status} (${countsLine(done)}); POST answered in ${((posted - started) / 1000).toFixed(2)} s`,
  };
  if (label !== 'warm')
    console.log(`${label}: ${n} lines in ${seconds.toFixed(1)} s (load ${await loadAverage()})`);
  return { phase, workflowId: await batchWorkflowIdOf(stack.pool, created.id) };
}

/** `n` single POSTs by `clients` concurrent clients, done when every generation has ended. */
async function runPosts(stack: Stack, label: string, n: number): Promise<Phase> {
  const account = await benchAccount(stack.pool, label);
  const before = await tableCounts(stack.pool);
  const memory = sampleRss({ api: stack.apiPid, worker: stack.workerPid });
  let next = 0;
  let [tooMany, unavailable] = [0, 0];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = next++; i < n; i = next++) {
        for (;;) {
          const response = await fetch(`${stack.apiUrl}/generations`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${account.key}`,
              'content-type': 'application/json',
              'idempotency-key': `${label}-${i}`,
            },
            body: JSON.stringify({ model: 'prism-2', prompt: `${label} line ${i}`, resolution: '1K' }),
          });
          await response.arrayBuffer();
          if (response.status === 202) break;
          if (response.status === 429) {
            tooMany++;
            await new Promise((r) => setTimeout(r, 1000 * Number(response.headers.get('retry-after') ?? 1)));
          } else if (response.status === 503) {
            unavailable++;
            await new Promise((r) => setTimeout(r, 250));
          } else throw new Error(`POST /v1/generations: ${response.status}`);
        }
      }
    }),
  );
  const posted = performance.now();
  let lastPrinted = Date.now();
  for (;;) {
    const { ended, total } = await stack.pool.one(sql.type(endedRow)`
      SELECT count(*) FILTER (WHERE status <> 'queued')::int AS ended, count(*)::int AS total
      FROM generations WHERE account_id = ${account.accountId}`);
    if (total === n && ended === n) break;
    if (Date.now() - lastPrinted >= 10_000) {
      console.log(`  ${label}: ${ended} of ${n} ended (load ${loadNow()})`);
      lastPrinted = Date.now();
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const seconds = (performance.now() - started) / 1000;
  const outcomes = await stack.pool.any(sql.type(outcomeRow)`
    SELECT status, count(*)::int AS n FROM generations WHERE account_id = ${account.accountId} GROUP BY status ORDER BY status`);
  if (label !== 'warm-posts')
    console.log(`${label}: ${n} generations in ${seconds.toFixed(1)} s (load ${await loadAverage()})`);
  return {
    label,
    seconds,
    memory: await memory.stop(),
    rows: rowsWritten(before, await tableCounts(stack.pool)),
    note: `${outcomes.map((o) => `${o.status} ${o.n}`).join(', ')}; all POSTed in ${((posted - started) / 1000).toFixed(1)} s; ${tooMany} × 429, ${unavailable} × 503`,
  };
}
