import { execFile } from 'node:child_process';
import { readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { batchLines, waitForBatch } from '../support/batches.js';
import { useListeningBatchStack } from './client-stack.js';
import { genBin, useGen } from './gen-cli.js';

/** The files under each custom_id folder of `dir`. */
async function folders(dir: string): Promise<Record<string, string[]>> {
  const found: Record<string, string[]> = {};
  for (const name of await readdir(dir).catch(() => [])) found[name] = await readdir(path.join(dir, name));
  return found;
}

describe('gen batch (real stack)', () => {
  const stack = useListeningBatchStack({
    worker: { simDelayMs: 20 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '8' },
    account: { oneTime: 10_000 },
  });
  const cli = useGen(stack, { tmpPrefix: 'gen-batch-', killAfterMs: 90_000 });
  const jsonl = async (name: string, lines: object[]) => {
    await writeFile(path.join(cli.home, name), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    return name;
  };

  it('on a terminal: a progress bar with counts, rate and time left; files into out/<custom_id>/', async () => {
    const file = await jsonl('tty.jsonl', batchLines(5));
    const output = await new Promise<{ code: number; stdout: string }>((resolve) =>
      execFile(
        'script',
        ['-qfec', `${process.execPath} ${genBin} batch ${file} --out tty-out`, '/dev/null'],
        { cwd: cli.home, env: { ...cli.envFor(stack.account.key), TERM: 'xterm' } },
        (error, stdout) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout }),
      ),
    );
    expect(output.code, output.stdout).toBe(0);
    expect(output.stdout).toMatch(/batch_\w+: 5 lines, \d+ credits at most/);
    // The bar, redrawn in place: counts per status, then the rate and the time left once lines end.
    // eslint-disable-next-line no-control-regex -- the terminal's erase-line sequence is what is checked
    expect(output.stdout).toMatch(/\r\u001b\[2Kbatch_\w+ \[[█░]{24}\] \d\/5 · /);
    expect(output.stdout).toMatch(
      /\[█{24}\] 5\/5 · 5 succeeded · 0 pending · [\d.]+ lines\/s · done · 5 files/,
    );
    expect(output.stdout).toMatch(/batch_\w+ completed: 5\/5 · 5 succeeded · 0 pending · 5 files in tty-out/);
    const found = await folders(path.join(cli.home, 'tty-out'));
    expect(Object.keys(found).sort()).toEqual(['line-0', 'line-1', 'line-2', 'line-3', 'line-4']);
    for (const files of Object.values(found)) expect(files).toHaveLength(1);
  });

  it('piped: plain progress lines on stderr, the ended batch as JSON on stdout', async () => {
    const file = await jsonl('piped.jsonl', batchLines(3));
    const result = await cli.gen(['batch', file, '--out', 'piped-out']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('\r');
    expect(result.stderr).toMatch(/^batch_\w+ (validating|in_progress): 0\/3 · /m);
    expect(result.stderr).toMatch(/^batch_\w+ completed: 3\/3 · 3 succeeded · 0 pending$/m);
    expect(JSON.parse(result.stdout)).toMatchObject({
      status: 'completed',
      request_counts: { succeeded: 3 },
    });
    expect(Object.keys(await folders(path.join(cli.home, 'piped-out'))).sort()).toEqual([
      'line-0',
      'line-1',
      'line-2',
    ]);
    // A bad line: one 400 naming it, nothing made (exit 1, like any other refusal of a request).
    const bad = await cli.gen(['batch', await jsonl('bad.jsonl', [{ custom_id: 'x', model: 'lumen-pro' }])]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/line 0/);
  });

  it('Ctrl-C leaves the batch running and says how to resume; --resume downloads only what is missing', async () => {
    const lines = batchLines(6, (i) => (i === 0 ? 'first, quick' : `line ${i} [sim:slow=2]`));
    const file = await jsonl('resume.jsonl', lines);
    const out = path.join(cli.home, 'resume-out');
    const run = cli.start(['batch', file, '--out', 'resume-out']);
    // Stopped once the first line's file is in (whole: a `.part` still downloading is taken away
    // by the Ctrl-C, with its folder): the others still run.
    const whole = async () => (await folders(out))['line-0']?.filter((f) => !f.endsWith('.part')) ?? [];
    await expect.poll(async () => (await whole()).length, { timeout: 60_000, interval: 100 }).toBe(1);
    run.stop();
    const stopped = await run.done;
    expect(stopped.code, stopped.stderr).toBe(130);
    const id = /(batch_\w+): 6 lines/.exec(stopped.stderr)![1]!;
    expect(stopped.stderr).toContain(
      `Stopped following; ${id} goes on. Resume with: gen batch --resume ${id} --out resume-out`,
    );
    const first = path.join(out, 'line-0', (await whole())[0]!);
    const firstWritten = (await stat(first)).mtimeMs;

    const resumed = await cli.gen(['batch', '--resume', id, '--out', 'resume-out']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ id, status: 'completed' });
    const found = await folders(out);
    expect(Object.keys(found).sort()).toEqual(lines.map((l) => l.custom_id).sort());
    for (const files of Object.values(found))
      expect(files.filter((f) => !f.endsWith('.part'))).toHaveLength(1);
    expect((await stat(first)).mtimeMs).toBe(firstWritten); // kept, not fetched again
    expect((await waitForBatch(stack.api, stack.account.key, id)).request_counts.succeeded).toBe(6);
  });
});
