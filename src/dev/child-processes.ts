import { spawn, type ChildProcess } from 'node:child_process';

interface ScriptOptions {
  env: NodeJS.ProcessEnv;
  /** Names it in errors; default the file. */
  name?: string;
  /** Node's own options, before the script (`--cpu-prof`, say). */
  nodeOptions?: readonly string[];
  /** Its stdout and stderr: shared with ours (default), or piped for the caller to read. */
  output?: 'inherit' | 'pipe';
  /** A process group of its own: a Ctrl-C in the terminal reaches only us, who stop it in order. */
  detached?: boolean;
  /** `ready` rejects past this; without it, the child may take as long as it takes. */
  readyTimeoutMs?: number;
}

interface RunningScript<Ready> {
  child: ChildProcess;
  /** The first message the script sends; rejects if it exits before, or is not ready in time. */
  ready: Promise<Ready>;
}

/**
 * Runs one of our files (TypeScript through tsx, or the build's JavaScript) in a Node process of its own, with an IPC channel on which it
 * says it is ready: `reportReady()` (src/process/lifecycle.ts) in our entry points, or a message carrying
 * what the parent needs to know. The channel is closed once it has, so it keeps neither alive.
 */
export function startScript<Ready = unknown>(file: string, options: ScriptOptions): RunningScript<Ready> {
  const output = options.output ?? 'inherit';
  // TypeScript through tsx; the build's JavaScript (dist/) on plain node, as production runs it.
  const loader = file.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...(options.nodeOptions ?? []), ...loader, file], {
    env: options.env,
    stdio: ['ignore', output, output, 'ipc'],
    detached: options.detached ?? false,
  });
  const name = options.name ?? file;
  const ready = new Promise<Ready>((resolve, reject) => {
    const timeoutMs = options.readyTimeoutMs;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => reject(new Error(`${name} did not become ready within ${timeoutMs / 1000} s`)),
            timeoutMs,
          );
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${signal ?? `code ${code}`}) before it was ready`));
    };
    child.once('exit', onExit);
    child.once('message', (message) => {
      clearTimeout(timer);
      child.off('exit', onExit);
      child.disconnect();
      resolve(message as Ready);
    });
  });
  return { child, ready };
}

/** SIGTERM, then SIGKILL if the child has not exited within `graceMs`. */
export function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
