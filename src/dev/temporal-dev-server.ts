import { spawn, type ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { ensureSearchAttributes } from '../temporal/search-attributes-setup.js';
import { stopChild } from './child-processes.js';
import { waitForPort } from './free-port.js';
import { temporalCliPath } from './temporal-binaries.js';

interface DevServerOptions {
  port: number;
  /** null: no web UI. */
  uiPort: number | null;
  /** SQLite file that keeps workflows across restarts; null: in memory. */
  dbFile: string | null;
  namespace?: string;
  /** Server settings (`--dynamic-config-value KEY=VALUE`), for a test server that must exceed a default. */
  dynamicConfig?: Record<string, number | string | boolean>;
  onOutput?: (line: string) => void;
  /**
   * A process group of its own (`npm start`): a Ctrl-C in the terminal then reaches only the
   * launcher, which stops the server after the processes that use it (and kills it should the
   * launcher end without stopping it).
   */
  detached?: boolean;
}

export interface RunningDevServer {
  address: string;
  uiUrl: string | null;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Starts `temporal server start-dev` on loopback and registers our search attributes. */
export async function startTemporalDevServer(options: DevServerOptions): Promise<RunningDevServer> {
  const executable = await temporalCliPath();
  const namespace = options.namespace ?? 'default';
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(options.port),
    '--namespace',
    namespace,
  ];
  args.push('--log-level', 'warn', '--log-format', 'pretty');
  if (options.dbFile) args.push('--db-filename', options.dbFile);
  // Fairness keys (a batch line's account, see admit-update.ts) are honoured only where the
  // server enables them; priority keys need nothing.
  const dynamicConfig = { 'matching.enableFairness': true, ...options.dynamicConfig };
  for (const [key, value] of Object.entries(dynamicConfig))
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  if (options.uiPort === null) args.push('--headless');
  else args.push('--ui-port', String(options.uiPort), '--ui-ip', '127.0.0.1');
  const child = spawn(executable, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached });
  // Out of the terminal's reach, it would outlive a launcher that ends without stopping it.
  const killOnExit = () => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL');
  if (options.detached) process.on('exit', killOnExit);
  const output: string[] = [];
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      output.push(line);
      if (output.length > 50) output.shift();
      options.onOutput?.(line);
    }
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) =>
      reject(new Error(`temporal dev server exited (${code}):\n${output.join('\n')}`)),
    ),
  );
  exited.catch(() => undefined);
  await Promise.race([waitForPort(options.port, '127.0.0.1', 60_000), exited]);

  const address = `127.0.0.1:${options.port}`;
  const connection = await Connection.connect({ address });
  try {
    await waitForNamespace(connection, namespace);
    await ensureSearchAttributes(connection, namespace);
  } finally {
    await connection.close();
  }
  return {
    address,
    uiUrl: options.uiPort === null ? null : `http://127.0.0.1:${options.uiPort}`,
    process: child,
    stop: async () => {
      await stopChild(child);
      process.off('exit', killOnExit);
    },
  };
}

async function waitForNamespace(connection: Connection, namespace: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await connection.workflowService.describeNamespace({ namespace });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
