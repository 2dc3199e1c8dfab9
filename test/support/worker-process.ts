import { spawn, type ChildProcess } from 'node:child_process';
import { inject } from 'vitest';

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
 * environment, the shared Temporal dev server and the prebuilt workflow bundle.
 */
export function workerProcesses(env: () => Record<string, string>): WorkerProcesses {
  const children: ChildProcess[] = [];
  let logs = '';
  return {
    start: () =>
      new Promise<ChildProcess>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker/main.ts'], {
          env: {
            ...process.env,
            TEMPORAL_ADDRESS: inject('temporalAddress'),
            WORKFLOW_BUNDLE_PATH: inject('workflowBundlePath'),
            ...env(),
          },
          stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        });
        children.push(child);
        child.stdout!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
        child.stderr!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
        child.once('message', () => resolve(child));
        child.once('exit', (code) => reject(new Error(`worker exited ${code}: ${logs.slice(-2000)}`)));
      }),
    logs: () => logs,
    killAll() {
      for (const child of children) child.kill('SIGKILL');
    },
  };
}
