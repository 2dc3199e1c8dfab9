import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';

/**
 * `npm start` as a newcomer runs it: no DATABASE_URL, no TEMPORAL_ADDRESS.
 * Ports and the data folder are moved so the test cannot collide with a
 * developer's running service.
 */
describe('npm start on embedded defaults', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  const running: ChildProcessWithoutNullStreams[] = [];

  afterAll(async () => {
    for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  function start() {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/dev/start.ts'], { env, stdio: 'pipe' });
    running.push(child);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const waitFor = (pattern: RegExp, timeoutMs = 120_000) =>
      new Promise<RegExpMatchArray>((resolve, reject) => {
        const timer = setInterval(() => {
          const match = pattern.exec(output);
          if (match) {
            clearInterval(timer);
            resolve(match);
          } else if (child.exitCode !== null || Date.now() - started > timeoutMs) {
            clearInterval(timer);
            reject(new Error(`no ${pattern} in:\n${output}`));
          }
        }, 100);
        const started = Date.now();
      });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, waitFor, exited, output: () => output };
  }

  it('starts everything, prints what a newcomer needs, refuses a second start, stops on Ctrl-C, keeps data', async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'start-test-'));
    await chmod(dataDir, 0o755); // run as root, PostgreSQL runs as `postgres` and must reach its data here
    const [api, results, temporal, ui, postgres, consolePort] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    env = {
      ...process.env,
      DATA_DIR: dataDir,
      API_PORT: String(api),
      RESULT_PORT: String(results),
      CONSOLE_PORT: String(consolePort),
      TEMPORAL_DEV_PORT: String(temporal),
      TEMPORAL_UI_PORT: String(ui),
      EMBEDDED_POSTGRES_PORT: String(postgres),
      LOG_LEVEL: 'warn',
    };
    delete env.DATABASE_URL;
    delete env.TEMPORAL_ADDRESS;

    const first = start();
    await first.waitFor(/Press Ctrl-C to stop/);
    const key = (await first.waitFor(/Development API key .*: (gsk_live_\w+)/))[1]!;
    expect(first.output()).toContain(`API base URL:   http://127.0.0.1:${api}/v1`);
    expect(first.output()).toContain(`Temporal UI:    http://127.0.0.1:${ui}`);

    const credits = await fetch(`http://127.0.0.1:${api}/v1/credits`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(credits.status).toBe(200);
    expect(await credits.json()).toEqual({ credits: 1000, subscription_credits: 0, one_time_credits: 1000 });
    expect((await fetch(`http://127.0.0.1:${ui}/`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${results}/nothing/here.png`)).status).toBe(404);
    // The console is up, printed, and the development key signs in.
    expect(first.output()).toContain(`Console:        http://127.0.0.1:${consolePort}`);
    const form = await fetch(`http://127.0.0.1:${consolePort}/sign-in`);
    const formCookie = form.headers.getSetCookie().map((c) => c.split(';')[0]!);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await form.text())![1]!;
    const signedIn = await fetch(`http://127.0.0.1:${consolePort}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: formCookie.join('; '), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, key }).toString(),
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.getSetCookie().some((c) => c.startsWith('console_session='))).toBe(true);

    const second = start();
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(/already running/);

    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
    expect(first.output()).toContain('Stopped.');
    await expect(fetch(`http://127.0.0.1:${api}/v1/credits`)).rejects.toThrow();

    const again = start();
    await again.waitFor(/Press Ctrl-C to stop/);
    expect(again.output()).toMatch(/developer@localhost has 1 active key/);
    const after = await fetch(`http://127.0.0.1:${api}/v1/credits`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(((await after.json()) as { credits: number }).credits).toBe(1000);
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  }, 300_000);
});
