import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import ts from 'typescript';
import { createDatabasePool, type DatabasePool } from '../src/db/pool.js';
import { startScript, stopChild } from '../src/dev/child-processes.js';
import { nativeAllocatorEnv } from '../src/dev/native-allocator.js';
import { freePort } from '../src/dev/free-port.js';
import { createFundedAccount } from '../src/dev/funded-account.js';
import { startTemporalDevServer } from '../src/dev/temporal-dev-server.js';
import { randomBase62 } from '../src/vocabulary/ids.js';
import { workerNodeOptions } from '../src/worker/node-options.js';
import { buildWorkflowBundle } from '../src/worker/workflow-bundle.js';
import { projectRoot } from '../src/config/project-root.js';
import { cpuBySource, type CpuSource } from './process-cpu.js';
import { benchDatabase, printColumns } from './support.js';

/**
 * What the stack's API and worker run: `tsx` (src/, as in development; the worker bundles its
 * workflows from a bundle made here) or `build` (BENCH_RUNTIME=build: dist/ on plain node, as in
 * production, with the workflow bundle made at build time; run `npm run build` first).
 */
export const benchRuntime: 'tsx' | 'build' = process.env.BENCH_RUNTIME === 'build' ? 'build' : 'tsx';

/** The entry file of each of our processes in a runtime. */
export function entryFile(runtime: 'tsx' | 'build', process: 'api' | 'worker' | 'result-host'): string {
  return runtime === 'build' ? `dist/${process}/main.js` : `src/${process}/main.ts`;
}

export interface Stack {
  apiUrl: string;
  key: string;
  accountId: string;
  temporalAddress: string;
  pool: DatabasePool;
  workerPid: number;
  apiPid: number;
  /** The stack's processes, each counted by its own PID and its children. */
  processes: Partial<Record<StackProcess, CpuSource>> &
    Record<Exclude<StackProcess, 'thumbnails'>, CpuSource>;
  env: NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

export type StackProcess = 'api' | 'worker' | 'sim renderer' | 'temporal' | 'postgres';

/**
 * The whole service as it runs in production, on this machine: embedded
 * PostgreSQL, an in-memory Temporal dev server, and our worker and API as
 * processes of their own. `env` adds to or overrides their configuration; `temporalDbFile` keeps
 * Temporal's state in that SQLite file instead of in memory (to measure what it stores);
 * `workerNodeOptions` are Node's options for the worker alone (`--inspect`, say), and so is
 * BENCH_WORKER_NODE_OPTIONS, for every bench: a V8 or Node option to try (`--optimize-for-size`, say).
 */
export async function startStack(
  env: NodeJS.ProcessEnv = {},
  options: {
    temporalDbFile?: string;
    workerNodeOptions?: readonly string[];
    /** Node's options for the API alone (`--inspect`, say). */
    apiNodeOptions?: readonly string[];
    thumbnailWorker?: boolean;
  } = {},
): Promise<Stack> {
  const database = await benchDatabase();
  // Its last lines, printed if it exits before the stack stops (a bench would otherwise wait on).
  const temporalOutput: string[] = [];
  let stopping = false;
  const temporal = await startTemporalDevServer({
    port: await freePort(),
    uiPort: null,
    dbFile: options.temporalDbFile ?? null,
    onOutput: (line) => {
      temporalOutput.push(line);
      if (temporalOutput.length > 30) temporalOutput.shift();
    },
  });
  temporal.process.once('exit', (code, signal) => {
    if (!stopping)
      console.error(
        `bench: the Temporal dev server exited (code ${code}, signal ${signal}); its last lines:\n${temporalOutput.join('\n')}`,
      );
  });
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-stack-'));
  await chmod(scratch, 0o755);
  const bundle = path.join(scratch, 'workflows.js');
  // The build brings its own bundle (dist/worker/workflow-code.js).
  if (benchRuntime === 'tsx') await buildWorkflowBundle(bundle);
  // env may name the API's port (a bench that must know its origin before it starts: PROVIDER_WEBHOOK_BASE_URL).
  const apiPort = env.API_PORT ? Number(env.API_PORT) : await freePort();
  const common: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: database.url,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: `bench-${randomBase62(6)}`,
    STORAGE_DIR: path.join(scratch, 'results'),
    API_PORT: String(apiPort),
    RATE_LIMIT_PER_MINUTE: String(1_000_000_000),
    CONCURRENT_GENERATIONS_PER_ACCOUNT: String(1_000_000),
    ...(benchRuntime === 'tsx' ? { WORKFLOW_BUNDLE_PATH: bundle } : {}),
    LOG_LEVEL: 'warn',
    MALLOC_ARENA_MAX: '2',
    // As production runs (the Dockerfile preloads jemalloc), when this machine has it.
    ...nativeAllocatorEnv(),
    ...env,
  };
  // BENCH_CPU_PROFILE_DIR: the API and worker write V8 CPU profiles there when they stop (open in Chrome DevTools).
  const profileDir = process.env.BENCH_CPU_PROFILE_DIR;
  const profiling = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const children: ChildProcess[] = [];
  const start = async (file: string, nodeOptions: readonly string[] = [], env = common) => {
    const { child, ready } = startScript(file, { env, nodeOptions: [...profiling, ...nodeOptions] });
    children.push(child);
    await ready;
    return child;
  };
  const workerOptions = [
    ...workerNodeOptions,
    ...(options.workerNodeOptions ?? []),
    ...(process.env.BENCH_WORKER_NODE_OPTIONS ?? '').split(' ').filter(Boolean),
  ];
  // thumbnailWorker: the gallery's thumbnails (their own task queue, after a generation succeeded)
  // are made by a worker process of their own, so that their CPU is counted apart (`thumbnails`).
  // The metrics ports env names are the generation worker's: two processes cannot listen on one.
  const { WORKER_METRICS_PORT: _ours, WORKER_TEMPORAL_METRICS_PORT: _sdk, ...unmeasured } = common;
  const queues = (value: string) => ({
    ...(value === 'thumbnails' ? unmeasured : common),
    WORKER_TASK_QUEUES: value,
  });
  const [worker, api, thumbnails] = await Promise.all([
    // The worker with the options production gives it on its command line.
    start(
      entryFile(benchRuntime, 'worker'),
      workerOptions,
      options.thumbnailWorker ? queues('generations') : common,
    ),
    start(entryFile(benchRuntime, 'api'), options.apiNodeOptions),
    options.thumbnailWorker
      ? start(entryFile(benchRuntime, 'worker'), workerNodeOptions, queues('thumbnails'))
      : undefined,
  ]);

  const pool = await createDatabasePool(database.url, { maximumPoolSize: 4 });
  const { accountId, key } = await createFundedAccount(pool, {
    email: `bench-${randomBase62(6)}@example.test`,
    oneTime: 1_000_000_000,
    reason: 'bench',
  });

  return {
    apiUrl: `http://127.0.0.1:${apiPort}/v1`,
    key,
    accountId,
    temporalAddress: temporal.address,
    pool,
    workerPid: worker.pid!,
    apiPid: api.pid!,
    processes: {
      api: { pid: api.pid },
      worker: { pid: worker.pid, except: renderer },
      // The simulated provider's drawing, a child of the worker (a real provider's own machines).
      'sim renderer': { pid: worker.pid, matching: renderer },
      temporal: { pid: temporal.process.pid },
      postgres: { pid: database.pid },
      ...(thumbnails ? { thumbnails: { pid: thumbnails.pid } } : {}),
    },
    env: common,
    async stop() {
      stopping = true;
      await Promise.all(children.map((child) => stopChild(child, 5000)));
      await pool.end();
      await temporal.stop();
      await database.stop();
      await rm(scratch, { recursive: true, force: true });
    },
  };
}

/** The simulated provider's renderer process, a child of the worker: by its command line. */
const renderer = 'providers/simulated/renderer-child';

/**
 * A worker for bench/bare-workflows.ts on the same Temporal server, run as ours is: under tsx, or
 * (BENCH_RUNTIME=build) as JavaScript on plain node, and from a workflow bundle made here, so that
 * neither side pays for a loader or a bundler the other does not.
 */
export async function startBareWorker(
  temporalAddress: string,
  taskQueue: string,
): Promise<{ pid: number; stop(): Promise<void> }> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-bare-'));
  const bundle = path.join(scratch, 'bare-workflows.js');
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(projectRoot, 'bench', 'bare-workflows.ts'),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} },
  });
  await writeFile(bundle, code);
  const file = benchRuntime === 'build' ? await compileBareWorker() : 'bench/bare-worker.ts';
  const { child, ready } = startScript(file, {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress,
      TASK_QUEUE: taskQueue,
      BARE_WORKFLOW_BUNDLE: bundle,
    },
  });
  await ready;
  return {
    pid: child.pid!,
    async stop() {
      await stopChild(child, 5000);
      await rm(scratch, { recursive: true, force: true });
    },
  };
}

/**
 * bench/bare-worker.ts and its activities as JavaScript in dist/bench/ (inside the project, so that
 * node_modules is found from there), transpiled file by file as tsc builds src/.
 */
async function compileBareWorker(): Promise<string> {
  const out = path.join(projectRoot, 'dist', 'bench');
  await mkdir(out, { recursive: true });
  for (const name of ['bare-worker', 'bare-activities']) {
    const source = await readFile(path.join(projectRoot, 'bench', `${name}.ts`), 'utf8');
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023 },
    });
    await writeFile(path.join(out, `${name}.js`), outputText);
  }
  return path.join(out, 'bare-worker.js');
}

/** The closed-loop generation benches' settings: BENCH_SECONDS (30, split over the rounds), BENCH_ROUNDS (3), BENCH_CLIENTS (20). */
export function closedLoopSettings(): { seconds: number; clients: number; rounds: number } {
  return {
    seconds: Number(process.env.BENCH_SECONDS ?? 30),
    clients: Number(process.env.BENCH_CLIENTS ?? 20),
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
  };
}

export interface LoopResult {
  count: number;
  errors: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Every successful call's latency in ms, sorted. */
  latencies: number[];
  seconds: number;
}

/** Runs `concurrency` closed-loop clients for `seconds`; each call's latency is recorded. */
export async function closedLoop(
  concurrency: number,
  seconds: number,
  call: () => Promise<unknown>,
): Promise<LoopResult> {
  const latencies: number[] = [];
  let errors = 0;
  const deadline = Date.now() + seconds * 1000;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        const t = performance.now();
        try {
          await call();
          latencies.push(performance.now() - t);
        } catch {
          errors++;
        }
      }
    }),
  );
  return summarise(latencies, errors, (Date.now() - started) / 1000);
}

function summarise(latencies: number[], errors: number, seconds: number): LoopResult {
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    count: latencies.length,
    errors,
    perSecond: latencies.length / seconds,
    p50: at(0.5),
    p99: at(0.99),
    latencies,
    seconds,
  };
}

/**
 * Measures closed loops in alternating rounds (A B C, then C B A, …), so that
 * none always runs last on a Temporal server the others have already filled
 * with open workflows, and merges each side's rounds: calls per second over
 * the rounds' total time, percentiles over every call, CPU per call over all
 * calls. Also returns each round's figures, to show the machine's noise.
 */
export async function alternatingRounds<Side extends string>(
  options: { rounds: number; seconds: number; clients: number; processes: Record<string, CpuSource> },
  sides: Record<Side, () => Promise<unknown>>,
): Promise<Record<Side, LoopResult & { cpu: Record<string, number>; rounds: number[] }>> {
  type Run = LoopResult & { cpu: Record<string, number> };
  const names = Object.keys(sides) as Side[];
  const runs = new Map<Side, Run[]>(names.map((name) => [name, []]));
  for (let round = 0; round < options.rounds; round++) {
    for (const side of round % 2 === 0 ? names : [...names].reverse())
      runs
        .get(side)!
        .push(
          await withCpuPerCall(options.processes, () =>
            closedLoop(options.clients, options.seconds, sides[side]),
          ),
        );
  }
  const merge = (list: Run[]) => {
    const merged = summarise(
      list.flatMap((r) => r.latencies),
      list.reduce((n, r) => n + r.errors, 0),
      list.reduce((n, r) => n + r.seconds, 0),
    );
    const cpu = Object.fromEntries(
      Object.keys(options.processes).map((name) => [
        name,
        list.reduce((ms, r) => ms + r.cpu[name]! * r.count, 0) / merged.count,
      ]),
    );
    return { ...merged, cpu, rounds: list.map((r) => r.perSecond) };
  };
  return Object.fromEntries(names.map((name) => [name, merge(runs.get(name)!)])) as Record<
    Side,
    LoopResult & { cpu: Record<string, number>; rounds: number[] }
  >;
}

export function printComparison(
  title: string,
  rows: Array<{ label: string; perSecond: number; p50: number; p99: number; count: number; errors: number }>,
): void {
  console.log(`\n${title}`);
  printColumns(46, [
    ['', 'per s', 'p50 ms', 'p99 ms', 'count', 'errors'],
    ...rows.map((r) => [
      r.label,
      r.perSecond.toFixed(1),
      r.p50.toFixed(1),
      r.p99.toFixed(1),
      String(r.count),
      String(r.errors),
    ]),
  ]);
}

/** Runs `run` and adds the CPU milliseconds each process spent per counted call. */
export async function withCpuPerCall<T extends { count: number }>(
  processes: Record<string, CpuSource>,
  run: () => Promise<T>,
): Promise<T & { cpu: Record<string, number> }> {
  const before = await cpuBySource(processes);
  const result = await run();
  const after = await cpuBySource(processes);
  const cpu = Object.fromEntries(
    Object.keys(processes).map((name) => [name, (after[name]! - before[name]!) / result.count]),
  );
  return { ...result, cpu };
}

/** Each round's calls per second, side by side: how much of a difference the machine's noise makes. */
export function printRounds(sides: Array<[label: string, rounds: number[]]>): void {
  const list = (values: number[]) => values.map((v) => v.toFixed(1)).join(' / ');
  console.log(
    `\nper round, calls/s: ${sides.map(([label, rounds]) => `${label} ${list(rounds)}`).join('; ')}`,
  );
}

/** Prints each run's CPU per call, by process. */
export function printCpu(title: string, runs: Array<[label: string, cpu: Record<string, number>]>): void {
  console.log(`\n${title}`);
  for (const [label, cpu] of runs) {
    console.log(
      `  ${label.padEnd(8)} ${Object.entries(cpu)
        .map(([name, ms]) => `${name} ${ms.toFixed(1)}`)
        .join(', ')}`,
    );
  }
}
