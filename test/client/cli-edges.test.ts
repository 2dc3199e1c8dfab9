import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { connect, createServer, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Client } from '../../clients/typescript/src/index.js';
import { download, DownloadError } from '../../clients/typescript/src/node/index.js';
import { startFaultyFront } from '../support/faulty-front.js';
import { chargesOf } from '../support/ledger.js';
import { generationCount, useListeningStack } from './client-stack.js';
import { genBin, useGen } from './gen-cli.js';

/** Issue 27 item 5: gen refuses bad input before it acts, and leaves nothing half done or readable. */
describe('gen at its edges: bad numbers, lost creates, the key typed and kept, stalled downloads (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 500 }, worker: { simDelayMs: 300 } });
  const cli = useGen(stack, { tmpPrefix: 'gen-edges-', killAfterMs: 25_000 });
  const { envFor, gen } = cli;

  it('a bad number or duration is refused with exit 2 and a message before any request; 2s and 1m are durations', async () => {
    const front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, []);
    const baseURL = `${front.origin}/v1`;
    try {
      const refused: Array<[string[], string]> = [
        [['run', 'lumen-lite', 'x [sim:slow=30]', '--timeout', '10sec'], '--timeout 10sec'],
        [['run', 'lumen-lite', 'x', '--timeout', 'soon'], '--timeout soon'],
        [['run', 'lumen-lite', 'x', '--timeout', '0'], '--timeout 0'],
        [['run', 'lumen-lite', 'x', '--max-credits', 'ten'], '--max-credits ten'],
        [['run', 'lumen-lite', 'x', '--max-credits', '1e3'], '--max-credits 1e3'],
        [['wait', 'gen_x', '--timeout=-5'], '--timeout -5'],
        [['list', '--limit', '0'], '--limit 0'],
      ];
      for (const [args, option] of refused) {
        const result = await gen(args, { baseURL, killAfterMs: 8000 });
        expect({ args, code: result.code, requests: front.requests.length }).toEqual({
          args,
          code: 2,
          requests: 0,
        });
        expect(result.stderr).toContain(`gen: ${option}: expected`);
      }
      // A good duration still bounds the wait: a few held GETs, then exit 7 (still running).
      const slow = await gen(['run', 'lumen-lite', 'slow [sim:slow=8]', '--timeout', '2s', '--no-download'], {
        baseURL,
      });
      expect(slow.code, slow.stderr).toBe(7);
      expect(front.requests.filter((r) => r.line.startsWith('GET /v1/generations/')).length).toBeLessThan(6);
      const minute = await gen(['run', 'lumen-lite', 'quick', '--timeout', '1m', '--no-download'], {
        baseURL,
      });
      expect(minute.code, minute.stderr).toBe(0);
    } finally {
      await front.close();
    }
  }, 60_000);

  it('a create that ends in 503 or 429 after its retries prints the key; re-running with it is the same generation, charged once', async () => {
    // The first attempt is processed but its answer is lost; the retries meet a proxy's 503s.
    const front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, [
      { requestLine: 'POST /v1/generations ', fault: { kind: 'drop-answer' } },
      { requestLine: 'POST /v1/generations ', fault: { kind: 'answer', status: 503 }, times: 3 },
      {
        requestLine: 'POST /v1/generations ',
        fault: { kind: 'answer', status: 429, headers: { 'retry-after': '1' } },
        times: 4,
      },
    ]);
    try {
      const before = await generationCount(stack.db.pool, stack.account.accountId);
      const baseURL = `${front.origin}/v1`;
      const failed = await gen(['run', 'lumen-lite', 'answered 503', '--no-wait'], { baseURL });
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('The API answered 503 after every retry.');
      const key = /^ {2}--idempotency-key (\S+)$/m.exec(failed.stderr)?.[1];
      expect(key, failed.stderr).toBeDefined();

      const limited = await gen(['run', 'lumen-lite', 'answered 429', '--no-wait'], { baseURL });
      expect(limited.code).toBe(1);
      expect(limited.stderr).toMatch(/answered 429 after every retry[^]*--idempotency-key \S+/);
      expect(front.remaining()).toEqual([0, 0, 0]);

      const again = await gen(['run', 'lumen-lite', 'answered 503', '--no-wait', '--idempotency-key', key!]);
      expect(again.code, again.stderr).toBe(0);
      expect(await generationCount(stack.db.pool, stack.account.accountId)).toBe(before + 1);
      expect(await chargesOf(stack.db.pool, again.stdout.trim())).toMatchObject({ debits: 1 });
    } finally {
      await front.close();
    }
  }, 60_000);

  it('the client itself refuses a wait timeout or poll interval that is not a number, before any request', async () => {
    let requests = 0;
    const client = new Client({
      apiKey: stack.account.key,
      baseURL: stack.listening.baseURL,
      fetch: (input, init) => {
        requests++;
        return fetch(input, init);
      },
    });
    await expect(client.generations.wait('gen_x', { timeoutMs: NaN })).rejects.toThrow(RangeError);
    await expect(client.generations.wait('gen_x', { pollIntervalMs: Number('2s') })).rejects.toThrow(
      RangeError,
    );
    expect(() => new Client({ apiKey: 'k', timeoutMs: NaN })).toThrow(RangeError);
    expect(requests).toBe(0);
  });

  it('--api-key and --base-url win over GENERATION_API_KEY and GENERATION_BASE_URL', async () => {
    const result = await gen(
      ['credits', '--api-key', stack.account.key, '--base-url', stack.listening.baseURL],
      { key: 'gsk_live_wrong', baseURL: 'http://127.0.0.1:9/v1' },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ credits: expect.any(Number) });
  });

  it('gen login on a terminal: the key typed is not shown', async () => {
    // script(1) runs gen on a pseudo-terminal whose line discipline echoes what is typed unless gen turns it off.
    const command = `'${process.execPath}' '${genBin}' login`;
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      cwd: cli.home,
      env: { ...envFor(undefined), XDG_CONFIG_HOME: path.join(cli.home, 'tty-config'), TERM: 'xterm' },
    });
    let screen = '';
    child.stdout.on('data', (c: Buffer) => (screen += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    await expect.poll(() => screen, { timeout: 15_000 }).toContain('API key');
    // Typed after the prompt; Ctrl-D ends the input for a reader that waits for the end of it.
    child.stdin.write(`${stack.account.key}\r\u0004`);
    const code = await Promise.race([
      exited,
      new Promise((r) => setTimeout(() => r('still running'), 15_000)),
    ]);
    child.stdin.end();
    expect(code, screen).toBe(0);
    expect(screen).toContain('Key saved to');
    expect(screen).not.toContain(stack.account.key);
    const file = path.join(cli.home, 'tty-config', 'gen', 'config.json');
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ api_key: stack.account.key });
  }, 45_000);

  it('gen login replaces an old 0644 config file with a 0600 one, never writing the key into the old one', async () => {
    const configDir = path.join(cli.home, 'config', 'gen');
    await mkdir(configDir, { recursive: true });
    const file = path.join(configDir, 'config.json');
    await writeFile(file, '{ "api_key": "gsk_live_old" }\n');
    await chmod(file, 0o644);
    // Someone who could read the old file holds it open: a chmod afterwards does not shut them out.
    const reader = await open(file, 'r');
    try {
      const login = await gen(['login'], { key: undefined, stdin: `${stack.account.key}\n` });
      expect(login.code, login.stderr).toBe(0);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ api_key: stack.account.key });
      const { buffer, bytesRead } = await reader.read({ buffer: Buffer.alloc(4096), position: 0 });
      expect(buffer.subarray(0, bytesRead).toString()).not.toContain(stack.account.key);
      expect(await readdir(configDir)).toEqual(['config.json']); // no temporary file left
    } finally {
      await reader.close();
    }
  });

  it('a download that stalls gives up after its idle timeout and leaves no partial file; an abort does the same', async () => {
    const client = new Client({ apiKey: stack.account.key, baseURL: stack.listening.baseURL });
    const done = await client.generations.run({ model: 'lumen-pro', prompt: 'a long stall' });
    const image = done.output!.images![0]!;
    const whole = await (await fetch(image.url)).arrayBuffer();
    expect(whole.byteLength).toBeGreaterThan(4000);
    const stall = await startStallingFront(new URL(image.url), 2000);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'gen-stall-'));
    try {
      const stalledUrl = `${stall.origin}${new URL(image.url).pathname}`;
      const outcome = await Promise.race([
        download({ ...image, url: stalledUrl }, { to: dir + path.sep, idleTimeoutMs: 1500 }).catch((e) => e),
        new Promise((r) => setTimeout(() => r('still downloading after 12 s'), 12_000)),
      ]);
      expect(outcome).toBeInstanceOf(DownloadError);
      expect(String((outcome as Error).message)).toContain('no data for 1.5 s');
      expect(await readdir(dir)).toEqual([]);

      const controller = new AbortController();
      const aborted = download(
        { ...image, url: stalledUrl },
        { to: dir + path.sep, signal: controller.signal },
      );
      setTimeout(() => controller.abort(), 500);
      await expect(aborted).rejects.toThrow();
      expect(await readdir(dir)).toEqual([]);

      // From the host itself, it lands whole, under the URL's name.
      const saved = await download(image, { to: dir + path.sep });
      expect(Buffer.compare(await readFile(saved.path), Buffer.from(whole))).toBe(0);
      expect(await readdir(dir)).toEqual([path.basename(new URL(image.url).pathname)]);
    } finally {
      await stall.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

/** A relay to the result host that passes the first `bytes` of each answer, then goes silent (the connection stays open). */
async function startStallingFront(target: URL, bytes: number) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let passed = 0;
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (passed < bytes) client.write(chunk.subarray(0, bytes - passed));
      passed += chunk.length;
    });
    for (const socket of [client, upstream]) socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
