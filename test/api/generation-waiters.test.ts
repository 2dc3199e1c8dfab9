import { describe, expect, it } from 'vitest';
import { GenerationWaiters } from '../../src/api/generation-waiters.js';
import type { GenerationRow } from '../../src/db/generation-reads.js';
import { createLogger } from '../../src/process/logger.js';

describe('GenerationWaiters past a cap', () => {
  // Never read terminal: the waiters registered here wait until closed.
  const read = () => Promise.resolve(null);
  const waiters = (caps: { perKey: number; perProcess: number }) =>
    new GenerationWaiters({ listening: () => true, log: createLogger('waiters-test', 'silent'), ...caps });

  it('declines (null) instead of refusing: nothing waits, and the caller answers at once', async () => {
    const perKey = waiters({ perKey: 2, perProcess: 10 });
    const held = [perKey.wait('gen_a', 'key_1', 60_000, read), perKey.wait('gen_b', 'key_1', 60_000, read)];
    expect(perKey.wait('gen_c', 'key_1', 60_000, read)).toBeNull();
    expect(perKey.size).toBe(2);
    // Another key still waits.
    const other = perKey.wait('gen_c', 'key_2', 60_000, read);
    expect(other).toBeInstanceOf(Promise);
    perKey.close();
    expect(await Promise.all([...held, other])).toEqual([null, null, null]);

    const perProcess = waiters({ perKey: 10, perProcess: 1 });
    const one = perProcess.wait('gen_a', 'key_1', 60_000, read);
    expect(perProcess.wait('gen_a', 'key_2', 60_000, read)).toBeNull();
    expect(perProcess.size).toBe(1);
    perProcess.close();
    expect(await one).toBeNull();
  });
});

describe('GenerationWaiters tell each non-terminal read (an MCP call’s progress)', () => {
  it('`seen` gets every read that finds the generation queued, from the read the waiters share', async () => {
    const rows = [
      { status: 'queued', provider: null },
      { status: 'queued', provider: 'simulated' },
      { status: 'succeeded', provider: 'simulated' },
    ].map((r) => ({ id: 'gen_a', ...r }) as unknown as GenerationRow);
    let reads = 0;
    const read = () => Promise.resolve(rows[Math.min(reads++, rows.length - 1)]!);
    const waiters = new GenerationWaiters({
      listening: () => true,
      log: createLogger('waiters-test', 'silent'),
    });
    const first: Array<string | null> = [];
    const second: Array<string | null> = [];
    // Registering reads once: the first waiter is told the generation is queued.
    const one = waiters.wait('gen_a', 'key_1', 60_000, read, undefined, (row) => first.push(row.provider));
    await expect.poll(() => first).toEqual([null]);
    // The second's registration reads again (the provider has it now): both are told, from one read.
    const two = waiters.wait('gen_a', 'key_2', 60_000, read, undefined, (row) => second.push(row.provider));
    await expect.poll(() => second).toEqual(['simulated']);
    expect(first).toEqual([null, 'simulated']);
    expect(reads).toBe(2);
    // The change that ends it answers both, and tells neither as progress.
    waiters.changed('gen_a');
    expect((await one)?.status).toBe('succeeded');
    expect((await two)?.status).toBe('succeeded');
    expect([first, second, reads]).toEqual([[null, 'simulated'], ['simulated'], 3]);
  });
});
