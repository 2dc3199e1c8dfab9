import { execFile, spawn } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { setKeyRules } from '../../src/db/key-limits.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { startFaultyFront } from '../support/faulty-front.js';
import { chargesOf } from '../support/ledger.js';
import { generationCount, useListeningStack } from './client-stack.js';
import { genBin, useGen, type GenResult as Result } from './gen-cli.js';

describe('gen, the command line, as a user meets it (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 500 }, worker: { simDelayMs: 1500 } });
  const cli = useGen(stack, { tmpPrefix: 'gen-cli-' });
  const { envFor, gen } = cli;

  it('on a terminal: the status line updates in place, then the saved file with its size and dimensions', async () => {
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const command = [
      process.execPath,
      genBin,
      'run',
      'lumen-pro',
      'a lighthouse at dusk',
      '-p',
      'resolution=1K',
      '-p',
      'aspect_ratio=16:9',
    ]
      .map(quote)
      .join(' ');
    // script(1) gives gen a pseudo-terminal, as a person's shell would.
    const result = await new Promise<Result>((resolve) => {
      execFile(
        'script',
        ['-qfec', command, '/dev/null'],
        { cwd: cli.home, env: { ...envFor(stack.account.key), TERM: 'xterm' } },
        (error, stdout, stderr) =>
          resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(result.code, result.stdout).toBe(0);
    // What the screen shows: each line as its last carriage return left it.
    const eraseLine = '\u001b[2K';
    const screen = result.stdout
      .split('\n')
      .map((line) => line.split(eraseLine).join(''))
      .map(
        (line) =>
          line
            .split('\r')
            .filter((part) => part.trim() !== '')
            .at(-1)
            ?.trim() ?? '',
      );
    expect(screen[0]).toMatch(/^lumen-pro: 4 credits · balance \d+ credits$/);
    expect(result.stdout).toMatch(/gen_\w+ queued \ds/); // drawn while it ran
    const status = screen.find((l) => l.includes('→'))!;
    expect(status).toMatch(/^gen_\w+ queued \d+s → ✔ succeeded \d+s · 4 credits$/);
    const id = /^(gen_\w+)/.exec(status)![1]!;
    const saved = screen.find((l) => l.startsWith('generations/'))!;
    expect(saved).toMatch(new RegExp(`^generations/${id}/\\S+\\.png  \\d+\\.\\d KiB  1024×576$`));
    const file = path.join(cli.home, saved.split('  ')[0]!);
    expect(await sharp(file).metadata()).toMatchObject({ width: 1024, height: 576, format: 'png' });
  });

  it('--json (automatic off a terminal): the final generation on stdout, a local image sent with -p images=@file, files into -o DIR', async () => {
    await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3366ff' } })
      .png()
      .toFile(path.join(cli.home, 'in.png'));
    const result = await gen([
      'run',
      'lumen-pro',
      'make it red',
      '-p',
      'images=@in.png',
      '-p',
      'resolution=1K',
      '-o',
      'out',
    ]);
    expect(result.code, result.stderr).toBe(0);
    const generation = JSON.parse(result.stdout);
    expect(generation).toMatchObject({ status: 'succeeded', model: 'lumen-pro', credits: 4 });
    expect(generation.input.images[0]).toMatch(/^(data:image\/png;base64,|http)/);
    const line = result.stderr.split('\n').find((l) => l.startsWith('out/'))!;
    expect((await stat(path.join(cli.home, line.split('  ')[0]!))).size).toBeGreaterThan(0);
  });

  it('--no-wait prints only the id; gen wait ID --jsonl prints a line per status change; gen get, list, credits', async () => {
    // Slow enough that it is still queued when `gen wait` starts, however busy the machine.
    const created = await gen(['run', 'lumen-lite', 'later [sim:slow=15]', '--no-wait']);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^gen_\w+$/);
    const waited = await gen(['wait', id, '--jsonl', '--no-download']);
    expect(waited.code, waited.stderr).toBe(0);
    const lines = waited.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((g) => g.status)).toEqual(['queued', 'succeeded']);
    expect(JSON.parse((await gen(['get', id])).stdout)).toMatchObject({ id, status: 'succeeded' });
    const listed = JSON.parse((await gen(['list', '--status', 'succeeded', '--model', 'lumen-lite'])).stdout);
    expect(listed.map((g: { id: string }) => g.id)).toContain(id);
    expect(JSON.parse((await gen(['credits'])).stdout)).toMatchObject({ credits: expect.any(Number) });
  }, 90_000);

  it('gen models and gen models show: ids, media, price ranges; options with types, defaults, allowed values and prices', async () => {
    const table = await gen(['models']);
    expect(table.code).toBe(0);
    const models = JSON.parse(table.stdout); // stdout is not a terminal: JSON
    expect(models.map((m: { id: string }) => m.id)).toContain('lumen-pro');
    const shown = await new Promise<Result>((resolve) =>
      execFile(
        'script',
        ['-qfec', `${process.execPath} ${genBin} models show lumen-pro`, '/dev/null'],
        { cwd: cli.home, env: envFor(stack.account.key) },
        (error, stdout) => resolve({ code: error ? 1 : 0, stdout, stderr: '' }),
      ),
    );
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/resolution\s+enum\s+1K\s+1K \(\d+\), 2K \(\d+\), 4K \(\d+\)/);
    const list = await new Promise<string>((resolve) =>
      execFile(
        'script',
        ['-qfec', `${process.execPath} ${genBin} models`, '/dev/null'],
        { cwd: cli.home, env: envFor(stack.account.key) },
        (_e, stdout) => resolve(stdout),
      ),
    );
    expect(list).toMatch(/motion-1\s+video\s+\d+–\d+ \/s/);
  });

  it('exit codes: 5 failed, 6 rejected by the provider, 4 credits (and --max-credits), 3 auth, 2 usage, 7 still running', async () => {
    const failed = await gen(['run', 'lumen-lite', 'breaks [sim:fail]']);
    expect(failed.code, failed.stderr).toBe(5);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      status: 'failed',
      error: { code: 'generation_failed' },
      credits_refunded: true,
    });
    const rejected = await gen(['run', 'lumen-lite', 'refused [sim:reject]']);
    expect(rejected.code, rejected.stderr).toBe(6);
    expect(JSON.parse(rejected.stdout)).toMatchObject({
      error: { code: 'provider_rejected' },
      credits_refunded: true,
    });

    const poor: TestAccount = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const tooDear = await gen(['run', 'lumen-pro', 'too dear'], { key: poor.key });
    expect(tooDear.code, tooDear.stderr).toBe(4);
    expect(tooDear.stderr).toContain('insufficient_credits');
    const capped = await gen(['run', 'lumen-pro', 'capped', '--max-credits', '3']);
    expect(capped.code).toBe(4);
    expect(capped.stderr).toContain('nothing was sent');

    // A key held to a limit: gen key says what is left; past it, exit 4 like any credit refusal.
    const limited: TestAccount = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    await setKeyRules(stack.db.pool, limited.keyId, {
      spend_limit: 3,
      limit_reset: 'weekly',
      models: ['lumen-lite'],
    });
    expect(JSON.parse((await gen(['key'], { key: limited.key })).stdout)).toMatchObject({
      spend_limit: 3,
      limit_reset: 'weekly',
      limit_remaining: 3,
      models: ['lumen-lite'],
    });
    const overLimit = await gen(['run', 'lumen-lite', 'over [sim:slow=0]', '--no-wait'], {
      key: limited.key,
    });
    expect(overLimit.code, overLimit.stderr).toBe(0);
    const past = await gen(['run', 'lumen-lite', 'past the limit'], { key: limited.key });
    expect(past.code, past.stderr).toBe(4);
    expect(past.stderr).toContain('key_spend_limit_exceeded');

    expect((await gen(['credits'], { key: 'sk_live_wrong' })).code).toBe(3);
    expect((await gen(['credits'], { key: undefined })).code).toBe(3);
    expect((await gen(['run', 'lumen-pro'])).code).toBe(2);
    expect((await gen(['run', 'lumen-pro', 'x', '--bogus'])).code).toBe(2);

    const slow = await gen(['run', 'lumen-lite', 'slow [sim:slow=6]', '--timeout', '1']);
    expect(slow.code, slow.stderr).toBe(7);
    expect(slow.stderr).toMatch(/gen wait gen_\w+/);
  });

  it('a network failure prints the key to re-run with; re-running with it is the same generation, charged once', async () => {
    // Every answer to the create is lost after the API processed it.
    const front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, [
      { requestLine: 'POST /v1/generations ', fault: { kind: 'drop-answer' }, times: 10 },
    ]);
    try {
      const before = await generationCount(stack.db.pool, stack.account.accountId);
      const lost = await gen(['run', 'lumen-lite', 'answers lost', '--no-wait'], {
        baseURL: `${front.origin}/v1`,
      });
      expect(lost.code).toBe(1);
      const key = /^ {2}--idempotency-key (\S+)$/m.exec(lost.stderr)?.[1];
      expect(key, lost.stderr).toBeDefined();
      const again = await gen(['run', 'lumen-lite', 'answers lost', '--no-wait', '--idempotency-key', key!]);
      expect(again.code, again.stderr).toBe(0);
      const id = again.stdout.trim();
      expect(await generationCount(stack.db.pool, stack.account.accountId)).toBe(before + 1);
      expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, submissions: 1 });
    } finally {
      await front.close();
    }
  });

  it('Ctrl-C stops the waiting, prints how to resume (exit 130); --params-json - reads the body from stdin', async () => {
    const child = spawn(
      process.execPath,
      [genBin, 'run', 'lumen-lite', 'interrupted [sim:slow=5]', '--jsonl'],
      {
        cwd: cli.home,
        env: envFor(stack.account.key),
      },
    );
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    // The first JSON line is the queued generation: the wait has begun.
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
        if (stdout.includes('\n')) resolve();
      }),
    );
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    const id = JSON.parse(stdout.split('\n')[0]!).id;
    expect(stderr).toContain(`gen wait ${id}`);
    expect((await gen(['wait', id, '--no-download'])).code).toBe(0); // it went on

    const piped = await gen(['run', 'lumen-lite', 'from stdin', '--params-json', '-', '--no-wait'], {
      stdin: JSON.stringify({ quality: 'high', output_format: 'jpeg' }),
    });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).toContain('lumen-lite: 4 credits');
    expect(JSON.parse((await gen(['get', piped.stdout.trim()])).stdout).input).toEqual({
      prompt: 'from stdin',
      quality: 'high',
      output_format: 'jpeg',
    });
  });

  it('gen login keeps the key in the XDG config folder with mode 0600, and gen uses it', async () => {
    const login = await gen(['login'], { key: undefined, stdin: `${stack.account.key}\n` });
    expect(login.code, login.stderr).toBe(0);
    const file = path.join(cli.home, 'config', 'gen', 'config.json');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ api_key: stack.account.key });
    expect((await gen(['credits'], { key: undefined })).code).toBe(0);
    expect((await gen(['login'], { key: undefined, stdin: 'sk_live_wrong\n' })).code).toBe(3);
  });
});
