import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { DependencyWaitTimedOut, waitForDependency } from '../src/dependencies/wait.js';
import { freePort } from '../src/dev/free-port.js';
import { createLogger } from '../src/process/logger.js';

describe('waiting for a dependency at start', () => {
  const logger = createLogger('test', 'silent');
  const dependency = { name: 'PostgreSQL', target: 'db:5432/app' };

  it('retries with doubling pauses up to the cap, then goes on once it answers', async () => {
    const pauses: number[] = [];
    let calls = 0;
    await waitForDependency(
      dependency,
      () => (++calls < 7 ? Promise.reject(new Error('connect ECONNREFUSED')) : Promise.resolve()),
      logger,
      {
        timeoutMs: 60_000,
        initialDelayMs: 100,
        maxDelayMs: 1_000,
        sleep: (ms) => (pauses.push(ms), Promise.resolve()),
      },
    );
    expect(calls).toBe(7);
    expect(pauses).toEqual([100, 200, 400, 800, 1_000, 1_000]);
  });

  it('gives up after its timeout, naming the dependency and the last reason', async () => {
    const error = await waitForDependency(
      dependency,
      () => Promise.reject(Object.assign(new Error('password authentication failed'), { code: '28P01' })),
      logger,
      { timeoutMs: 50, initialDelayMs: 20, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyWaitTimedOut);
    expect((error as Error).message).toMatch(
      /^PostgreSQL at db:5432\/app did not answer in \d+ s \(\d+ attempts; last: 28P01: password authentication failed\)$/,
    );
  });

  it('the API process waits for PostgreSQL, then exits 1 with that message when it never comes', async () => {
    const port = await freePort();
    const result = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/api/main.ts'], {
      env: {
        ...process.env,
        DATABASE_URL: `postgres://app:hunter2@127.0.0.1:${port}/app`,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        API_PORT: String(await freePort()),
        DEPENDENCY_WAIT_TIMEOUT_MS: '1600',
        LOG_LEVEL: 'info',
      },
    }).then(
      () => ({ code: 0, stdout: '' }),
      (e: { code: number; stdout: string }) => e,
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`waiting for PostgreSQL at 127.0.0.1:${port}/app: connect ECONNREFUSED`);
    expect(result.stdout).toMatch(new RegExp(`PostgreSQL at 127\\.0\\.0\\.1:${port}/app did not answer in`));
    expect(result.stdout).not.toContain('hunter2');
  }, 30_000);
});
