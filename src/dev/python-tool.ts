import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { projectRoot } from '../config/project-root.js';
import { fetchOnce } from './fetch-once.js';
import { isExecutable } from './temporal-binaries.js';

/** A pinned Python tool from PyPI, kept in a virtualenv of its own under the git-ignored `.tools/`. */
interface PythonTool {
  /** The virtualenv is `.tools/<folder>/`; a new pin gets a new folder. */
  folder: string;
  /** What pip installs, pinned (`package==version`). */
  requirements: string[];
  /** Arguments to the virtualenv's Python that must succeed before the install is kept. */
  check: string[];
}

const toolsDir = path.join(projectRoot, '.tools');
/** A staging folder or a lock older than this was left by an install that died. */
const staleMs = 30 * 60 * 1000;

/**
 * The tool's virtualenv Python, installed on first use. The install runs in a staging folder
 * renamed into place only once pip has finished and the check passes, so an install killed half
 * way never leaves a broken folder under the final name. A lock folder makes a second process
 * (another test run, another checkout sharing `.tools/`) wait for the first instead of
 * installing the same thing beside it.
 */
export async function pythonToolPython(tool: PythonTool): Promise<string> {
  const venv = path.join(toolsDir, tool.folder);
  const python = path.join(venv, 'bin', 'python');
  if (await isExecutable(python)) return python;
  await fetchOnce(
    path.join(toolsDir, `.${tool.folder}.lock`),
    () => isExecutable(python),
    () => install(tool, venv),
    staleMs,
  );
  return python;
}

async function install(tool: PythonTool, venv: string): Promise<void> {
  const basePython = ['python3', 'python'].find((name) => onPath(name));
  if (!basePython)
    throw new Error(`Python 3 with pip and venv is needed to fetch ${tool.requirements.join(' ')}.`);
  const stagingPrefix = `.${tool.folder}-staging-`;
  await removeStale(stagingPrefix);
  // A copy whose Python has gone (made on another machine, say) is replaced.
  await rm(venv, { recursive: true, force: true });
  const staging = path.join(toolsDir, `${stagingPrefix}${randomBytes(4).toString('hex')}`);
  const started = Date.now();
  process.stderr.write(
    `Fetching ${tool.requirements.join(' ')} from PyPI into ${path.relative(projectRoot, venv)} (once)...\n`,
  );
  try {
    // The virtualenv without a pip of its own (Debian's python3 may lack ensurepip); the base
    // Python's pip installs into it (pip 22.3 or later).
    await run(basePython, ['-m', 'venv', '--without-pip', staging], tool);
    const python = path.join(staging, 'bin', 'python');
    await run(
      basePython,
      [
        '-m',
        'pip',
        '--python',
        python,
        'install',
        '--quiet',
        '--disable-pip-version-check',
        '--no-input',
        ...tool.requirements,
      ],
      tool,
    );
    await run(python, tool.check, tool);
    await rename(staging, venv);
    process.stderr.write(`Fetched ${tool.folder} in ${((Date.now() - started) / 1000).toFixed(1)} s.\n`);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function removeStale(stagingPrefix: string): Promise<void> {
  for (const name of await readdir(toolsDir)) {
    if (!name.startsWith(stagingPrefix)) continue;
    const folder = path.join(toolsDir, name);
    const info = await stat(folder).catch(() => null);
    if (info && Date.now() - info.mtimeMs > staleMs) await rm(folder, { recursive: true, force: true });
  }
}

/** Runs a command to its end without blocking this process (a test run starts its servers meanwhile). */
async function run(command: string, args: string[], tool: PythonTool): Promise<void> {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  });
  if (code !== 0) {
    throw new Error(
      `${command} ${args.slice(0, 3).join(' ')} … failed (exit ${code ?? signal}) while fetching ${tool.folder}`,
    );
  }
}

function onPath(name: string): boolean {
  return spawnSync(name, ['--version'], { stdio: 'ignore' }).status === 0;
}
