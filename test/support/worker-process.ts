import { testDeployment } from './worker.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { inject } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';

/** The real worker as `npm run worker` runs it, in a process of its own, and what it wrote. */
export interface WorkerProcesses {
  /** Starts one more worker; resolves once it reports ready. */
  start(): Promise<ChildProcess>;
  /** Everything the workers wrote to stdout and stderr. */
  logs(): string;
  /** Kills every worker started (SIGKILL: as a crash would). */
  killAll(): void;
}

/**
 * Workers configured by environment only, like production: `env` is added to this process's
 * environment, the shared Temporal dev server and the prebuilt workflow bundle. With `cwd`, each
 * runs in the folder it names (asked once per worker), so that no relative path is shared.
 */
export function workerProcesses(
  env: () => Record<string, string>,
  options: { cwd?: () => string } = {},
): WorkerProcesses {
  const children: ChildProcess[] = [];
  let logs = '';
  return {
    start: async () => {
      const child = await startServiceProcess(
        'worker/main.ts',
        {
          TEMPORAL_ADDRESS: inject('temporalAddress'),
          WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
          WORKER_DEPLOYMENT_NAME: testDeployment,
          ...env(),
        },
        {
          ...(options.cwd ? { cwd: options.cwd() } : {}),
          onOutput: (text) => (logs += text),
          started: (started) => children.push(started),
        },
      );
      return child;
    },
    logs: () => logs,
    killAll() {
      for (const child of children) child.kill('SIGKILL');
    },
  };
}

/** SIGKILLs a process (as a crash would) and resolves once it has exited; one already gone is left. */
export async function crash(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/**
 * One of our processes (`src/<entry>`) as `npm run` starts it, with `env` added to this process's
 * environment; resolves once it reports ready, rejects if it exits first. It may run in a folder
 * of its own (`cwd`): tsx and the project's tsconfig are then named by their full paths.
 */
export function startServiceProcess(
  entry: string,
  env: Record<string, string>,
  options: {
    cwd?: string;
    onOutput?: (text: string) => void;
    started?: (child: ChildProcess) => void;
  } = {},
): Promise<ChildProcess> {
  const tsx = pathToFileURL(createRequire(path.join(projectRoot, 'package.json')).resolve('tsx')).href;
  let output = '';
  return new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', tsx, path.join(projectRoot, 'src', entry)], {
      cwd: options.cwd ?? projectRoot,
      env: { ...process.env, TSX_TSCONFIG_PATH: path.join(projectRoot, 'tsconfig.json'), ...env },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    options.started?.(child);
    const collect = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      options.onOutput?.(text);
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`${entry} exited ${code}: ${output.slice(-2000)}`)));
  });
}
