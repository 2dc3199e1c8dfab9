import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDatabasePool } from '../src/db/pool.js';
import { startScript, stopChild } from '../src/dev/child-processes.js';
import { freePort } from '../src/dev/free-port.js';
import { createFundedAccount } from '../src/dev/funded-account.js';
import { startTemporalDevServer } from '../src/dev/temporal-dev-server.js';
import { randomBase62 } from '../src/vocabulary/ids.js';
import { projectRoot } from '../src/config/project-root.js';
import { benchDatabase, printColumns } from './support.js';
import { entryFile } from './stack.js';

/**
 * npm run bench:startup — the production build (dist/ on plain node, workflow bundle made at build
 * time) against tsx (src/, the worker bundling its workflows as it starts), on this machine in one
 * run: builds dist/ first, then in alternating rounds (tsx, build, build, tsx, …) starts an API
 * and a worker and measures
 * - worker start to first task: from spawning the worker to the 202 of a POST sent at the same
 *   moment (the API holds it until a worker has run the workflow's admission);
 * - worker start to ready (it polls and serves);
 * - API and worker RSS at idle, 5 s after that generation succeeded.
 * BENCH_ROUNDS (default 2: each runtime twice). The machine is shared: read the rounds' spread.
 */
type Runtime = 'tsx' | 'build';
interface Round {
  runtime: Runtime;
  firstTaskMs: number;
  readyMs: number;
  apiRssMb: number;
  workerRssMb: number;
}

const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
await build();
const database = await benchDatabase();
const temporal = await startTemporalDevServer({ port: await freePort(), uiPort: null, dbFile: null });
const scratch = await mkdtemp(path.join(os.tmpdir(), 'bench-startup-'));
await chmod(scratch, 0o755);
const pool = await createDatabasePool(database.url, { maximumPoolSize: 2 });
const { key } = await createFundedAccount(pool, {
  email: `bench-${randomBase62(6)}@example.test`,
  oneTime: 1_000_000,
  reason: 'bench',
});
const results: Round[] = [];
try {
  const order: Runtime[] = [];
  for (let i = 0; i < rounds; i++)
    order.push(...(i % 2 === 0 ? (['tsx', 'build'] as const) : (['build', 'tsx'] as const)));
  for (const runtime of order) {
    const round = await measure(runtime);
    results.push(round);
    console.log(
      `${runtime.padEnd(5)} first task ${round.firstTaskMs.toFixed(0)} ms, ready ${round.readyMs.toFixed(0)} ms, ` +
        `API RSS ${round.apiRssMb.toFixed(0)} MB, worker RSS ${round.workerRssMb.toFixed(0)} MB`,
    );
  }
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const mid = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const of = (runtime: Runtime, field: keyof Omit<Round, 'runtime'>) =>
    median(results.filter((r) => r.runtime === runtime).map((r) => r[field]));
  console.log(
    `\nmedians over ${rounds} round(s) each (${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)})`,
  );
  printColumns(34, [
    ['', 'tsx', 'build'],
    ...(
      [
        ['worker start to first task, ms', 'firstTaskMs'],
        ['worker start to ready, ms', 'readyMs'],
        ['API RSS at idle, MB', 'apiRssMb'],
        ['worker RSS at idle, MB', 'workerRssMb'],
      ] as const
    ).map(([label, field]) => [label, of('tsx', field).toFixed(0), of('build', field).toFixed(0)]),
  ]);
} finally {
  await pool.end();
  await temporal.stop();
  await database.stop();
  await rm(scratch, { recursive: true, force: true });
}

async function measure(runtime: Runtime): Promise<Round> {
  const apiPort = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: database.url,
    TEMPORAL_ADDRESS: temporal.address,
    // A queue of the round's own: no earlier round's work reaches this worker.
    TEMPORAL_TASK_QUEUE: `startup-${randomBase62(6)}`,
    STORAGE_DIR: path.join(scratch, 'results'),
    API_PORT: String(apiPort),
    // The POST waits for the worker to start, bundling included.
    ADMISSION_TIMEOUT_MS: '300000',
    API_REQUEST_TIMEOUT_MS: '300000',
    SIM_PROVIDER_DELAY_MS: '0',
    PROVIDER_POLL_INTERVAL_MS: '50',
    LOG_LEVEL: 'warn',
    MALLOC_ARENA_MAX: '2',
  };
  delete env.WORKFLOW_BUNDLE_PATH;
  const children: ChildProcess[] = [];
  try {
    const api = startScript(entryFile(runtime, 'api'), { env });
    children.push(api.child);
    await api.ready;
    const apiUrl = `http://127.0.0.1:${apiPort}/v1`;
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const started = performance.now();
    const worker = startScript(entryFile(runtime, 'worker'), { env });
    children.push(worker.child);
    const readyAt = worker.ready.then(() => performance.now() - started);
    const response = await fetch(`${apiUrl}/generations`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: 'lumen-lite', prompt: `startup ${randomBase62(8)}` }),
    });
    const firstTaskMs = performance.now() - started;
    if (response.status !== 202) throw new Error(`POST: ${response.status} ${await response.text()}`);
    const { id } = (await response.json()) as { id: string };
    const readyMs = await readyAt;
    for (;;) {
      const generation = (await (await fetch(`${apiUrl}/generations/${id}`, { headers })).json()) as {
        status: string;
      };
      if (generation.status === 'succeeded') break;
      if (generation.status !== 'queued') throw new Error(`generation ${id}: ${generation.status}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // Idle: let the last tasks and the garbage collector settle.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    return {
      runtime,
      firstTaskMs,
      readyMs,
      apiRssMb: await rssMb(api.child.pid!),
      workerRssMb: await rssMb(worker.child.pid!),
    };
  } finally {
    await Promise.all(children.map((child) => stopChild(child, 10_000)));
  }
}

async function rssMb(pid: number): Promise<number> {
  return Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

/** npm run build, into dist/ (what `npm run api` and `npm run worker` run). */
function build(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/dev/build.ts'], {
      cwd: projectRoot,
      stdio: 'inherit',
    });
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`build exited ${code}`))));
  });
}
