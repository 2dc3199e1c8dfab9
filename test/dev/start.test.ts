import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { keepingRequests } from '../support/test-servers.js';

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
    // A process group of its own, as a terminal gives a command: a Ctrl-C there reaches the whole group.
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/dev/start.ts'], {
      env,
      stdio: 'pipe',
      detached: true,
    });
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
    const [
      api,
      results,
      temporal,
      ui,
      postgres,
      apiMetrics,
      workerMetrics,
      sdkMetrics,
      resultMetrics,
      consolePort,
    ] = await Promise.all(Array.from({ length: 10 }, () => freePort()));
    env = {
      ...process.env,
      DATA_DIR: dataDir,
      API_PORT: String(api),
      RESULT_PORT: String(results),
      CONSOLE_PORT: String(consolePort),
      TEMPORAL_DEV_PORT: String(temporal),
      TEMPORAL_UI_PORT: String(ui),
      EMBEDDED_POSTGRES_PORT: String(postgres),
      METRICS_PORT: String(apiMetrics),
      WORKER_METRICS_PORT: String(workerMetrics),
      WORKER_TEMPORAL_METRICS_PORT: String(sdkMetrics),
      RESULT_METRICS_PORT: String(resultMetrics),
      // Long enough that a generation is still in the worker's hands at Ctrl-C.
      SIM_PROVIDER_DELAY_MS: '8000',
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
    for (const [label, port] of [
      ['API metrics:    ', apiMetrics],
      ['Worker metrics: ', workerMetrics],
      ['Worker SDK metrics: ', sdkMetrics],
      ['Result metrics: ', resultMetrics],
    ] as const) {
      expect(first.output()).toContain(`${label}http://127.0.0.1:${port}/metrics`);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(200);
    }
    // A webhook to a plain-http receiver on this machine is taken, and its delivery verifies.
    expect(first.output()).toMatch(/Webhooks: +receivers on loopback are taken over plain http/);
    const deliveries: Array<{ headers: Record<string, string>; body: string }> = [];
    const hookReceiver = http.createServer(keepingRequests(deliveries));
    await new Promise<void>((resolve) => hookReceiver.listen(0, '127.0.0.1', resolve));
    try {
      const hookUrl = `http://localhost:${(hookReceiver.address() as AddressInfo).port}/hook`;
      const hooked = await fetch(`http://127.0.0.1:${api}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'lumen-lite',
          prompt: 'a webhook on my own machine [sim:slow=0]',
          webhook: { url: hookUrl, events: ['generation.succeeded'] },
        }),
      });
      expect(hooked.status, await hooked.clone().text()).toBe(202);
      const { id: hookedId } = (await hooked.json()) as { id: string };
      const { secret } = (await (
        await fetch(`http://127.0.0.1:${api}/v1/webhooks/secret`, {
          headers: { authorization: `Bearer ${key}` },
        })
      ).json()) as { secret: string };
      await expect.poll(() => deliveries.length, { timeout: 30_000 }).toBe(1);
      expect(new Webhook(secret).verify(deliveries[0]!.body, deliveries[0]!.headers)).toMatchObject({
        type: 'generation.succeeded',
        data: { id: hookedId },
      });
    } finally {
      await new Promise((resolve) => hookReceiver.close(resolve));
    }
    // The Temporal CLI as the banner gives it, pointed at this dev server by the state file.
    expect(first.output()).toContain('npm run temporal -- workflow list');
    const cli = spawn(process.execPath, ['--import', 'tsx', 'src/dev/temporal-cli.ts', 'workflow', 'list'], {
      env,
      stdio: 'pipe',
    });
    let cliOutput = '';
    cli.stdout.on('data', (chunk: Buffer) => (cliOutput += chunk.toString()));
    cli.stderr.on('data', (chunk: Buffer) => (cliOutput += chunk.toString()));
    expect(await new Promise((resolve) => cli.once('exit', resolve)), cliOutput).toBe(0);
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

    // A generation at the provider: nothing of it runs on the worker (it waits in its workflow), so
    // Ctrl-C stops at once, waiting for nothing.
    const created = await fetch(`http://127.0.0.1:${api}/v1/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'lumen-lite', prompt: 'in flight at Ctrl-C' }),
    });
    expect(created.status).toBe(202);
    const { id } = (await created.json()) as { id: string };
    const debited = await fetch(`http://127.0.0.1:${api}/v1/credits`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const balance = ((await debited.json()) as { credits: number }).credits;
    expect(balance).toBeLessThan(1000);
    // Ctrl-C once the simulated provider has the job.
    const databaseUrl = (await first.waitFor(/PostgreSQL: +(postgres:\/\/\S+)/))[1]!;
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await expect
        .poll(
          async () =>
            (await db.query('SELECT 1 FROM sim_provider_jobs WHERE token = $1', [`tok_${id}`])).rowCount,
          { timeout: 20_000, interval: 100 },
        )
        .toBe(1);
    } finally {
      await db.end();
    }
    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
    expect(first.output()).not.toMatch(/Waiting for worker/);
    expect(first.output()).toContain('Stopped.');
    await expect(fetch(`http://127.0.0.1:${api}/v1/credits`)).rejects.toThrow();

    const again = start();
    await again.waitFor(/Press Ctrl-C to stop/);
    expect(again.output()).toMatch(/developer@localhost has 1 active key/);
    const after = await fetch(`http://127.0.0.1:${api}/v1/credits`, {
      headers: { authorization: `Bearer ${key}` },
    });
    // Kept across the restart: the debit (or its refund, if the generation failed once resumed) and the generation.
    expect([balance, 1000]).toContain(((await after.json()) as { credits: number }).credits);
    const kept = await fetch(`http://127.0.0.1:${api}/v1/generations/${id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(kept.status).toBe(200);
    // Ctrl-C in the terminal (SIGINT to the whole process group): PostgreSQL and Temporal are out of
    // its reach, the processes stop before them, and a clean stop prints nothing else (LOG_LEVEL=warn:
    // no listener cut off, no reload failing on an ending pool).
    const beforeStop = again.output().length;
    process.kill(-again.child.pid!, 'SIGINT');
    expect(await again.exited).toBe(0);
    expect(again.output().slice(beforeStop).trim()).toBe('Stopping...\nStopped.');
  }, 300_000);
});
