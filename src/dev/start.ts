import type { ChildProcess } from 'node:child_process';
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { createApiKey } from '../auth/api-key-issuer.js';
import {
  loadConfig,
  loadLauncherConfig,
  loadTemporalSecurity,
  type Config,
} from '../config/service-config.js';
import { findAccount } from '../db/accounts-repository.js';
import { listApiKeys } from '../db/api-keys-repository.js';
import { migrate } from '../admin/migrate.js';
import { createDatabasePool } from '../db/pool.js';
import { writeDevState } from '../process/dev-state.js';
import { exitOnConfigError, loadOrExit } from '../process/lifecycle.js';
import { projectRoot } from '../config/project-root.js';
import { temporalConnectionOptions } from '../temporal/connection-options.js';
import { ensureSearchAttributes } from '../temporal/search-attributes-setup.js';
import { startScript, stopChild } from './child-processes.js';
import { nativeAllocatorEnv } from './native-allocator.js';
import { workerNodeOptions } from '../worker/node-options.js';
import {
  childStopGraceMs,
  developmentDefaults,
  metricsEndpoints,
  stillStoppingReason,
  webhookBannerLine,
} from './start-banner.js';
import { createFundedAccount } from './funded-account.js';
import { startMigratedPostgres, type MigratedPostgres } from './migrated-postgres.js';
import { startTemporalDevServer, type RunningDevServer } from './temporal-dev-server.js';

/**
 * `npm start`: the whole service on one machine. Without DATABASE_URL it runs
 * an embedded PostgreSQL, without TEMPORAL_ADDRESS the Temporal dev server
 * (with its web UI), both keeping their data under .data/ so work survives a
 * restart. Then it migrates, makes sure a development account exists, and
 * runs the API, the worker, the result host and the account console as child processes until
 * Ctrl-C, when it stops them all in order.
 */

const DEV_EMAIL = 'developer@localhost';
const say = (line = '') => process.stdout.write(`${line}\n`);

const launcher = loadOrExit(() => loadLauncherConfig());
const dataDir = launcher.DATA_DIR;
const lockFile = path.join(dataDir, 'service.lock');
await mkdir(dataDir, { recursive: true });
await takeLock();

const cleanups: Array<() => Promise<void>> = [];
let shuttingDown = false;
const children: Array<{ name: string; child: ChildProcess }> = [];
/** The service's configuration once loaded: what the stopping messages explain. */
let running: Config | null = null;

async function shutdown(code: number): Promise<never> {
  if (shuttingDown) process.exit(code);
  shuttingDown = true;
  say('\nStopping...');
  // Clients first (api, worker, result host, console), then the servers they use (out of the
  // terminal's process group, a Ctrl-C reached this launcher alone). One still running after a
  // moment is named, with what it waits for: a worker with a job in flight takes seconds.
  const config = running;
  const explain = setTimeout(() => {
    for (const { name, child } of children)
      if (child.exitCode === null && child.signalCode === null)
        say(`  Waiting for ${name}: ${config ? stillStoppingReason(name, config) : 'it is closing'}.`);
  }, 1_000);
  await Promise.all(children.map(({ child }) => stopChild(child, childStopGraceMs)));
  clearTimeout(explain);
  for (const cleanup of cleanups.reverse())
    await cleanup().catch((error: unknown) => say(`  ${String(error)}`));
  await rm(lockFile, { force: true });
  say('Stopped.');
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  await main();
} catch (error) {
  if (error instanceof Error && error.name === 'ConfigError') exitOnConfigError(error);
  say(`\nStart failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  await shutdown(1);
}

async function main(): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env };

  let postgres: MigratedPostgres | null = null;
  if (!env.DATABASE_URL) {
    const port = launcher.EMBEDDED_POSTGRES_PORT;
    say(
      `Starting embedded PostgreSQL on 127.0.0.1:${port} (data in ${path.relative(projectRoot, dataDir) || dataDir}/postgres)...`,
    );
    postgres = await startMigratedPostgres({
      dataDir: path.join(dataDir, 'postgres'),
      port,
      database: 'generations',
      persistent: true,
      // Out of the terminal's process group: a Ctrl-C reaches this launcher alone, which stops
      // the processes first, then the servers they use (shutdown).
      detached: true,
    });
    const running = postgres;
    cleanups.push(() => running.stop());
    env.DATABASE_URL = postgres.url;
    if (postgres.dataDir !== path.join(dataDir, 'postgres')) {
      say(
        `  (the postgres user cannot reach ${dataDir}; the cluster lives in ${postgres.dataDir}, PostgreSQL runs from ${postgres.binDir})`,
      );
    }
  }

  let temporal: RunningDevServer | null = null;
  if (!env.TEMPORAL_ADDRESS) {
    const port = launcher.TEMPORAL_DEV_PORT;
    const uiPort = launcher.TEMPORAL_UI_PORT;
    say(
      `Starting the Temporal dev server on 127.0.0.1:${port}, web UI on ${uiPort} (state in ${path.relative(projectRoot, dataDir) || dataDir}/temporal.db)...`,
    );
    temporal = await startTemporalDevServer({
      port,
      uiPort,
      dbFile: path.join(dataDir, 'temporal.db'),
      namespace: launcher.TEMPORAL_NAMESPACE,
      detached: true,
    });
    const running = temporal;
    cleanups.push(() => running.stop());
    env.TEMPORAL_ADDRESS = temporal.address;
    // On its own dev server the worker just started is the code being developed: its version takes
    // new generations, even after an edit (the dev server keeps the last run's current version).
    env.WORKER_SET_CURRENT_VERSION ??= 'always';
  } else {
    const connection = await Connection.connect(
      temporalConnectionOptions(env.TEMPORAL_ADDRESS, loadTemporalSecurity(env)),
    );
    await ensureSearchAttributes(connection, launcher.TEMPORAL_NAMESPACE).finally(() => connection.close());
  }

  env.STORAGE_DIR ??= path.join(dataDir, 'results');
  developmentDefaults(env);
  const config = loadConfig(env);
  running = config;

  // The embedded database was migrated as it started; one of your own is migrated now.
  const migration = postgres?.migration ?? (await migrate(config.DATABASE_URL));
  say(`Migrations: ${migration.applied.length} applied, ${migration.skipped.length} already in place.`);
  const devKey = await ensureDevelopmentAccount(config);

  const entry = (file: string) => path.join(projectRoot, 'src', file);
  await Promise.all([
    spawnChild('api', entry('api/main.ts'), env),
    // With the options production gives it on its command line (src/worker/node-options.ts).
    spawnChild('worker', entry('worker/main.ts'), env, workerNodeOptions),
    spawnChild('results', entry('result-host/main.ts'), env),
    spawnChild('console', entry('console/main.ts'), env),
  ]);

  await writeDevState(dataDir, {
    pid: process.pid,
    databaseUrl: config.DATABASE_URL,
    temporalAddress: config.TEMPORAL_ADDRESS,
    apiUrl: config.API_PUBLIC_URL,
    consoleUrl: config.CONSOLE_PUBLIC_URL,
    temporalUiUrl: temporal?.uiUrl ?? null,
  });
  say('');
  say('Generation service is running.');
  say(`  API base URL:   ${config.API_PUBLIC_URL}`);
  say(`  Results:        ${config.RESULT_BASE_URL}`);
  say(`  Console:        ${config.CONSOLE_PUBLIC_URL} (sign in with the development key)`);
  say(`  Temporal UI:    ${temporal?.uiUrl ?? `(your Temporal at ${config.TEMPORAL_ADDRESS})`}`);
  say(`  PostgreSQL:     ${postgres ? config.DATABASE_URL : '(DATABASE_URL)'}`);
  for (const [label, url] of metricsEndpoints(config)) say(`  ${`${label}:`.padEnd(15)} ${url}`);
  const webhooks = webhookBannerLine(config);
  if (webhooks) say(`  ${webhooks}`);
  say(`  Temporal CLI:   npm run temporal -- workflow list   (the CLI, pointed at this server)`);
  if (devKey.created) {
    say(`  Development API key (shown once; only its SHA-256 is stored): ${devKey.created}`);
  } else {
    say(
      `  Development account ${DEV_EMAIL} has ${devKey.activeKeys} active key(s); another: npm run dev:admin -- create-key --account ${DEV_EMAIL}`,
    );
  }
  say(`  Try: curl -H "Authorization: Bearer <key>" ${config.API_PUBLIC_URL}/credits`);
  say(
    'Press Ctrl-C to stop (a few seconds; with a job in flight the worker lets it finish, up to ' +
      `${Math.min(config.WORKER_SHUTDOWN_GRACE_MS, childStopGraceMs) / 1000} s).`,
  );
}

/** The development account: a completed credit pack, 1,000 credits, and a key if it has none. */
async function ensureDevelopmentAccount(
  config: Config,
): Promise<{ created: string | null; activeKeys: number }> {
  const pool = await createDatabasePool(config.DATABASE_URL, { maximumPoolSize: 1 });
  try {
    const account = await findAccount(pool, DEV_EMAIL);
    if (!account) {
      const created = await createFundedAccount(pool, {
        email: DEV_EMAIL,
        name: 'Development account',
        oneTime: 1000,
        keyName: 'development',
      });
      say(`Created the development account ${created.accountId} (${DEV_EMAIL}) with 1000 credits.`);
      return { created: created.key, activeKeys: 1 };
    }
    const active = (await listApiKeys(pool, account.id)).filter((k) => !k.revoked_at);
    if (active.length > 0) return { created: null, activeKeys: active.length };
    const { key } = await createApiKey(pool, { accountId: account.id, name: 'development' });
    return { created: key, activeKeys: 1 };
  } finally {
    await pool.end();
  }
}

/** Starts one of our processes; resolves when it reports ready (see `reportReady`). */
async function spawnChild(
  name: string,
  file: string,
  env: NodeJS.ProcessEnv,
  nodeOptions: readonly string[] = [],
): Promise<void> {
  const { child, ready } = startScript(file, {
    name,
    nodeOptions,
    // jemalloc when installed, else fewer glibc malloc arenas: image encoding on several threads
    // otherwise leaves freed memory resident (src/dev/native-allocator.ts).
    env: { MALLOC_ARENA_MAX: '2', ...nativeAllocatorEnv(), ...env },
    output: 'pipe',
    // Ctrl-C reaches only this launcher, which stops the children in order.
    detached: true,
    readyTimeoutMs: 120_000,
  });
  const prefix = `[${name}] `.padEnd(10);
  const forward = (stream: NodeJS.WritableStream) => (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line) stream.write(`${prefix}${line}\n`);
  };
  child.stdout?.on('data', forward(process.stdout));
  child.stderr?.on('data', forward(process.stderr));
  child.on('exit', (code, signal) => {
    if (shuttingDown) return;
    say(`${prefix}exited unexpectedly (${signal ?? `code ${code}`}); stopping everything.`);
    void shutdown(1);
  });
  children.push({ name, child });
  // If this launcher dies without cleaning up, don't leave the children behind.
  process.on('exit', () => child.exitCode === null && child.kill('SIGKILL'));
  try {
    await ready;
  } catch (error) {
    // Once stopping has begun (this child exited, or Ctrl-C), its not becoming ready is no news.
    if (shuttingDown) await new Promise<never>(() => undefined);
    throw error;
  }
}

/** One `npm start` per data folder: a second one would corrupt the embedded servers' data. */
async function takeLock(): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(lockFile, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number((await readFile(lockFile, 'utf8').catch(() => '')).trim());
      if (pid && isAlive(pid)) {
        process.stderr.write(
          `The service is already running from this folder (pid ${pid}). Stop it with Ctrl-C there, or: kill ${pid}\n`,
        );
        process.exit(1);
      }
      await rm(lockFile, { force: true }); // stale: its owner is gone
    }
  }
  throw new Error(`could not take ${lockFile}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
