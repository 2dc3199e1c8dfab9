import { spawn } from 'node:child_process';
import { inject } from 'vitest';
import { stopChild } from '../../src/dev/child-processes.js';
import { freePort } from '../../src/dev/free-port.js';

/** The real API as `npm run api` runs it, in a process of its own, listening on loopback. */
export interface ApiProcess {
  /** `http://127.0.0.1:PORT`. */
  origin: string;
  /** Its process id (to sample its memory and its child processes). */
  pid: number;
  /** Everything it wrote to stdout and stderr so far (JSON log lines). */
  logs(): string;
  stop(): Promise<void>;
}

/**
 * Configured by environment only, like production: `env` is added to this process's environment and
 * the shared Temporal dev server; the port is a free one. Resolves once it listens.
 *
 * A port found free can still be taken by another test's server before the process listens
 * (freePort draws from outside the range of outgoing connections' ports, so only a listener can):
 * the process then exits with EADDRINUSE, and is started again on another port, twice at most.
 */
export async function startApiProcess(env: Record<string, string>): Promise<ApiProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnFreePort(env);
    } catch (error) {
      if (attempt >= 3 || !(error instanceof Error) || !error.message.includes('EADDRINUSE')) throw error;
    }
  }
}

async function startOnFreePort(env: Record<string, string>): Promise<ApiProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/api/main.ts'], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      API_HOST: '127.0.0.1',
      API_PORT: String(port),
      DATABASE_POOL_SIZE: '3',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let logs = '';
  child.stdout!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`API exited ${code}: ${logs.slice(-2000)}`));
    child.once('exit', onExit);
    child.once('message', () => {
      child.off('exit', onExit);
      child.disconnect();
      resolve();
    });
  });
  return {
    origin: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    logs: () => logs,
    stop: () => stopChild(child, 5000),
  };
}
