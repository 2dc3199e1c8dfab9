import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { clientDir, ensureClientBuilt } from './client-stack.js';

/** The built command line of clients/typescript. */
export const genBin = path.join(clientDir, 'bin', 'gen.js');

export interface GenResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface GenOptions {
  /** GENERATION_API_KEY (undefined: none set); the stack's account's key by default. */
  key?: string | undefined;
  baseURL?: string;
  stdin?: string;
  /** SIGKILLed after this long, so that a loop on the old code ends the test, not the run. */
  killAfterMs?: number;
}

/**
 * gen as a user runs it against `stack` (useListeningStack): from a home folder of its own, made
 * with the client built before the file's tests and removed after them, its key and base URL
 * in the environment. `killAfterMs` is each run's default limit (none without it).
 */
export function useGen(
  stack: { listening: { baseURL: string }; account: { key: string } },
  defaults: { tmpPrefix: string; killAfterMs?: number },
) {
  let home = '';
  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), defaults.tmpPrefix));
    await ensureClientBuilt();
  }, 180_000);
  afterAll(async () => {
    if (home) await rm(home, { recursive: true, force: true });
  });

  const envFor = (key: string | undefined, baseURL = stack.listening.baseURL) => ({
    PATH: process.env.PATH!,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, 'config'),
    GENERATION_BASE_URL: baseURL,
    ...(key ? { GENERATION_API_KEY: key } : {}),
  });

  /** gen with pipes (stdout is not a terminal: --json is automatic). */
  const gen = (args: string[], options: GenOptions = {}) =>
    new Promise<GenResult>((resolve) => {
      const child = spawn(process.execPath, [genBin, ...args], {
        cwd: home,
        env: envFor('key' in options ? options.key : stack.account.key, options.baseURL),
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.stdin.end(options.stdin ?? '');
      const limit = options.killAfterMs ?? defaults.killAfterMs;
      const killer = limit === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), limit);
      child.on('close', (code) => {
        clearTimeout(killer);
        resolve({ code, stdout, stderr });
      });
    });

  /** gen left running (gen listen): its output so far, and its end; `stop()` sends it Ctrl-C's SIGINT. */
  const start = (args: string[], options: Omit<GenOptions, 'stdin'> = {}) => {
    const child = spawn(process.execPath, [genBin, ...args], {
      cwd: home,
      env: envFor('key' in options ? options.key : stack.account.key, options.baseURL),
    });
    const output = { stdout: '', stderr: '' };
    child.stdout.on('data', (c: Buffer) => (output.stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output.stderr += c.toString()));
    child.stdin.end();
    const limit = options.killAfterMs ?? defaults.killAfterMs;
    const killer = limit === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), limit);
    const done = new Promise<GenResult>((resolve) =>
      child.on('close', (code) => {
        clearTimeout(killer);
        resolve({ code, ...output });
      }),
    );
    return { output, done, stop: () => child.kill('SIGINT') };
  };

  return {
    start,
    /** The home folder (and working directory) of every run. */
    get home() {
      return home;
    },
    envFor,
    gen,
  };
}
