import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { sql } from 'slonik';
import { z } from 'zod';
import { freePort } from '../src/dev/free-port.js';
import { nativeAllocatorEnv } from '../src/dev/native-allocator.js';
import { randomBase62 } from '../src/vocabulary/ids.js';
import { inspect } from './inspector.js';
import { benchRuntime, startStack } from './stack.js';
import { loadAverage, printTargets } from './targets.js';

/**
 * npm run bench:idle — the cost of generations at rest: creates succeeded
 * generations (simulated provider, no delay) until 1,000 and then 10,000 are
 * parked on their 30-day expiry timers (each a retention run, its active run closed), and prints the worker's resident
 * memory at each mark, with what makes it up: each V8 isolate's heap (the main
 * thread's, and the workflow thread's, where Temporal runs the workflows),
 * external memory, and the rest (native: Temporal core's Rust side, libvips,
 * malloc), from /proc and the inspector (the worker runs with --inspect on
 * loopback). Targets, at rest: ≤ 400 MB at 10,000, and RSS(10,000) / RSS(1,000) ≤ 1.5.
 * BENCH_IDLE_TOTAL (default 10000), BENCH_CLIENTS (default 16); BENCH_IDLE_SETTLE_SECONDS: when
 * RSS is read after a mark's last task (default 5,15,30,60: the last is the figure at rest);
 * BENCH_HEAP_SNAPSHOT_DIR: heap snapshots of each thread at each mark, after its
 * RSS is read (compare them with bench/heap-summary.ts); BENCH_WORKER_NODE_OPTIONS: Node
 * or V8 options for the worker alone, to try one (`--max-semi-space-size=4`, say).
 */
const total = Number(process.env.BENCH_IDLE_TOTAL ?? 10_000);
const clients = Number(process.env.BENCH_CLIENTS ?? 16);
const snapshotDir = process.env.BENCH_HEAP_SNAPSHOT_DIR;
const marks = [Math.min(1_000, total), total];
/** When, after a mark's last task, its RSS is read; the last reading is the figure at rest. */
const settleSeconds = (process.env.BENCH_IDLE_SETTLE_SECONDS ?? '5,15,30,60').split(',').map(Number);
const inspectPort = await freePort();
const stack = await startStack(
  { SIM_PROVIDER_DELAY_MS: '0', PROVIDER_POLL_INTERVAL_MS: '50' },
  {
    workerNodeOptions: [`--inspect=127.0.0.1:${inspectPort}`],
  },
);
const headers = { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json' };
const status = async () => readFile(`/proc/${stack.workerPid}/status`, 'utf8');
const kb = (text: string, field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)?.[1] ?? NaN);
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
const rssMb = async () => kb(await status(), 'VmRSS') / 1024;
const connection = await Connection.connect({ address: stack.temporalAddress });
const temporal = new Client({ connection });
/**
 * Generations parked as the worker keeps them for 30 days: each a retention run (the active run
 * continued as new into it once it succeeded) asleep on its expiry
 * timer, the active run closed. Visibility is eventually consistent: polled.
 */
const parked = async () =>
  (
    await temporal.workflow.count(
      `WorkflowType = 'generationRetentionWorkflow' AND ExecutionStatus = 'Running'`,
    )
  ).count;
const active = async () =>
  (await temporal.workflow.count(`WorkflowType = 'generationWorkflow' AND ExecutionStatus = 'Running'`))
    .count;
const succeeded = () =>
  stack.pool.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`SELECT count(*)::int AS n FROM generations WHERE status = 'succeeded'`,
  );

/** What the worker's resident memory is made of, printed under its figure. */
async function printBreakdown(label: string): Promise<void> {
  const proc = await status();
  const rollup = await readFile(`/proc/${stack.workerPid}/smaps_rollup`, 'utf8');
  const anonymous = kb(rollup, 'Anonymous') * 1024;
  const rss = kb(rollup, 'Rss') * 1024;
  const inspector = await inspect(inspectPort);
  try {
    const threads = await inspector.memory();
    const heaps = threads.reduce((n, t) => n + t.usage.heapUsed, 0);
    for (const { thread, usage } of threads)
      console.log(
        `  ${thread.padEnd(10)} V8 heap ${mb(usage.heapUsed)} used of ${mb(usage.heapTotal)} MB, external ${mb(usage.external)} MB (array buffers ${mb(usage.arrayBuffers)} MB)`,
      );
    console.log(
      `  process    RSS ${mb(rss)} MB = file-backed ${mb(rss - anonymous)} MB (code: node, the Temporal core, libvips) + anonymous ${mb(anonymous)} MB; ` +
        `anonymous less the V8 heaps' used: ${mb(anonymous - heaps)} MB (Temporal core's Rust side, malloc, buffers); threads ${kb(proc, 'Threads')}`,
    );
    if (snapshotDir) {
      await mkdir(snapshotDir, { recursive: true });
      const files = await inspector.snapshot(path.join(snapshotDir, `worker-${label}`));
      console.log(`  heap snapshots: ${files.join(', ')}`);
    }
  } finally {
    inspector.close();
  }
}

const started = Date.now();
const loadBefore = await loadAverage();
try {
  console.log(`runtime: ${benchRuntime === 'build' ? 'build (dist/ on node)' : 'tsx (src/)'}`);
  const allocator = nativeAllocatorEnv();
  const preload = process.env.LD_PRELOAD ?? allocator.LD_PRELOAD;
  console.log(
    preload?.includes('jemalloc')
      ? `allocator: jemalloc (${preload}, MALLOC_CONF=${allocator.MALLOC_CONF ?? 'none'}), as the Dockerfile runs it`
      : 'allocator: glibc malloc with MALLOC_ARENA_MAX=2 (production preloads jemalloc: apt-get install libjemalloc2 to measure what it runs)',
  );
  await new Promise((r) => setTimeout(r, 5000)); // past the start's own allocations
  console.log(`worker RSS at start: ${(await rssMb()).toFixed(0)} MB`);
  await printBreakdown('start');
  let created = 0;
  const results: Array<{ parked: number; rss: number }> = [];
  for (const mark of marks) {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (created < mark) {
          created++;
          // On a loaded machine admission can outlast the API's deadline (503): the same key and body again.
          const init = {
            method: 'POST',
            headers: { ...headers, 'idempotency-key': randomBase62(24) },
            body: JSON.stringify({ model: 'prism-2', prompt: `parked ${randomBase62(8)}`, resolution: '1K' }),
          };
          for (let attempt = 1; ; attempt++) {
            const response = await fetch(`${stack.apiUrl}/generations`, init);
            await response.arrayBuffer();
            if (response.status === 202) break;
            if (response.status !== 503 || attempt === 30) throw new Error(`status ${response.status}`);
            await new Promise((r) => setTimeout(r, 1000));
          }
        }
      }),
    );
    while ((await succeeded()) < mark) await new Promise((r) => setTimeout(r, 1000));
    while ((await parked()) < mark || (await active()) > 0) await new Promise((r) => setTimeout(r, 1000));
    // Resident memory as the last tasks end, and once the worker is at rest, as parked generations
    // leave it for days: the allocator hands freed pages back over seconds (jemalloc's decay) and
    // V8 shrinks an idle heap, so the first figures still hold the burst's garbage.
    const lastTask = Date.now();
    const readings: number[] = [];
    for (const second of settleSeconds) {
      await new Promise((r) => setTimeout(r, lastTask + second * 1000 - Date.now()));
      readings.push(await rssMb());
    }
    const rss = readings.at(-1)!;
    const timeline = readings.map((mb, i) => `${mb.toFixed(0)} MB at ${settleSeconds[i]} s`);
    results.push({ parked: mark, rss });
    console.log(
      `${mark} generations parked on expiry timers (${await parked()} retention runs open, ${await active()} active runs) after ${((Date.now() - started) / 1000).toFixed(0)} s: worker RSS ${rss.toFixed(0)} MB at rest (${timeline.join(', ')} after the last task)`,
    );
    await printBreakdown(String(mark));
  }
  const [first, last] = [results[0]!, results.at(-1)!];
  printTargets(`targets (${benchRuntime}):`, [
    { label: `worker RSS at ${last.parked} parked`, value: last.rss, kind: 'max', target: 400, unit: 'MB' },
    {
      label: `RSS ${last.parked} / RSS ${first.parked}`,
      value: last.rss / first.rss,
      kind: 'max',
      target: 1.5,
      unit: 'ratio',
    },
  ]);
  console.log(
    `(WORKER_MAX_CACHED_WORKFLOWS=${stack.env.WORKER_MAX_CACHED_WORKFLOWS ?? 'default'}: parked generations live in Temporal's history, not in the worker)`,
  );
  console.log(`load average (1, 5, 15 min): ${loadBefore} at the start, ${await loadAverage()} at the end`);
} finally {
  await connection.close();
  await stack.stop();
}
