import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDatabasePool, type DatabasePool } from '../../src/db/pool.js';
import { stopChild } from '../../src/dev/child-processes.js';
import { freePort } from '../../src/dev/free-port.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { projectRoot } from '../../src/config/project-root.js';
import { createPaidAccount, bearer, type TestAccount } from '../support/api.js';

const run = promisify(execFile);

/**
 * The production build (`npm run build`), made once for this file under .data/ (inside the project,
 * so that node_modules is found from it, as from dist/): the processes run from it on plain `node`,
 * with no TypeScript loader, and the worker uses the workflow bundle made at build time.
 */
describe('the production build', () => {
  const buildDir = path.join(projectRoot, '.data', `build-test-${process.pid}`);
  const dist = path.join(buildDir, 'dist');
  const taskQueue = `build-${randomBase62(8)}`;
  const adminUrl = inject('pgAdminUrl');
  const database = `test_build_${randomBase62(10).toLowerCase()}`;
  const databaseUrl = adminUrl.replace(/\/postgres$/, `/${database}`);
  const children: ChildProcess[] = [];
  let storageDir: string;
  let pool: DatabasePool;

  beforeAll(async () => {
    // tsc over src/ and webpack over the workflows: tens of seconds on two busy cores.
    await run(
      process.execPath,
      ['--import', 'tsx', 'src/dev/build.ts', '--out', path.relative(projectRoot, dist)],
      {
        cwd: projectRoot,
      },
    );
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'build-results-'));
    await adminQuery(`CREATE DATABASE ${database}`);
  }, 300_000);

  afterAll(async () => {
    await Promise.all(children.map((child) => stopChild(child, 5_000)));
    await pool?.end();
    await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await rm(buildDir, { recursive: true, force: true });
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  it('holds JavaScript, the SQL migrations and the workflow bundle, and no TypeScript', async () => {
    const files = await readdir(dist, { recursive: true });
    expect(files).toContain(path.join('api', 'main.js'));
    expect(files).toContain(path.join('worker', 'workflow-code.js'));
    expect(files.filter((f) => f.endsWith('.ts'))).toEqual([]);
    const sources = (await readdir(path.join(projectRoot, 'src', 'db', 'migrations'))).filter((f) =>
      f.endsWith('.sql'),
    );
    expect((await readdir(path.join(dist, 'db', 'migrations'))).sort()).toEqual(sources.sort());
    // The development launcher (embedded servers, tsx) is no part of it.
    expect(files.some((f) => f.startsWith(`dev${path.sep}`))).toBe(false);
  });

  it('migrates an empty database with `node dist/admin/migrate-main.js`', async () => {
    const { stdout } = await run(process.execPath, [path.join(dist, 'admin', 'migrate-main.js')], {
      cwd: projectRoot,
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'info' },
    });
    const sources = (await readdir(path.join(projectRoot, 'src', 'db', 'migrations'))).filter((f) =>
      f.endsWith('.sql'),
    );
    expect(stdout).toContain(sources.at(-1)!.replace(/\.sql$/, ''));
    pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
  }, 60_000);

  it('runs a generation end to end: API and worker from the build on plain node', async () => {
    const apiPort = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: taskQueue,
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9',
      SIM_PROVIDER_DELAY_MS: '200',
      PROVIDER_POLL_INTERVAL_MS: '100',
      API_HOST: '127.0.0.1',
      API_PORT: String(apiPort),
      DATABASE_POOL_SIZE: '3',
      LOG_LEVEL: 'info',
    };
    // No WORKFLOW_BUNDLE_PATH: the worker finds the bundle the build put beside it.
    delete env.WORKFLOW_BUNDLE_PATH;
    const worker = await startBuilt('worker/main.js', env);
    const api = await startBuilt('api/main.js', env);
    expect(worker.logs()).toContain(path.join(dist, 'worker', 'workflow-code.js'));
    expect(worker.logs() + api.logs()).not.toMatch(/tsx/);

    const account: TestAccount = await createPaidAccount(pool, { oneTime: 100 });
    const origin = `http://127.0.0.1:${apiPort}`;
    const created = await fetch(`${origin}/v1/generations`, {
      method: 'POST',
      headers: { ...bearer(account.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'lumen-lite', prompt: 'built, not transpiled' }),
    });
    expect(created.status).toBe(202);
    const { id } = (await created.json()) as { id: string };
    let generation: { status: string; outputs?: unknown[] } = { status: 'queued' };
    const deadline = Date.now() + 60_000;
    while (!['succeeded', 'failed', 'canceled'].includes(generation.status) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const response = await fetch(`${origin}/v1/generations/${id}`, { headers: bearer(account.key) });
      generation = (await response.json()) as typeof generation;
    }
    expect(generation.status, JSON.stringify(generation)).toBe('succeeded');
    // The simulated provider drew it in its renderer child, forked from the build's JavaScript.
    expect((await readdir(storageDir, { recursive: true })).some((f) => /\.(png|jpe?g|webp)$/.test(f))).toBe(
      true,
    );
  }, 120_000);

  it('replays every recorded history against the bundle made at build time', async () => {
    const dir = path.join(projectRoot, 'test', 'fixtures', 'histories');
    const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort();
    expect(files.length).toBeGreaterThanOrEqual(5);
    for (const file of files) {
      const history = historyFromJSON(JSON.parse(await readFile(path.join(dir, file), 'utf8')));
      await Worker.runReplayHistory(
        { workflowBundle: { codePath: path.join(dist, 'worker', 'workflow-code.js') } },
        history,
        file,
      );
    }
  }, 120_000);

  /** `node <dist file>` with nothing else on the command line; resolves once it reports ready. */
  async function startBuilt(entry: string, env: NodeJS.ProcessEnv): Promise<{ logs(): string }> {
    const child = spawn(process.execPath, [path.join(dist, entry)], {
      cwd: projectRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    children.push(child);
    let logs = '';
    child.stdout!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
    await new Promise<void>((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`${entry} exited ${code}: ${logs.slice(-2000)}`));
      child.once('exit', onExit);
      child.once('message', () => {
        child.off('exit', onExit);
        child.disconnect();
        resolve();
      });
    });
    return { logs: () => logs };
  }

  async function adminQuery(text: string): Promise<void> {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(text);
    } finally {
      await client.end();
    }
  }
});
