import { describe, expect, it } from 'vitest';
import { GenerationWaiters } from '../../src/api/generation-waiters.js';
import { createLogger } from '../../src/logger.js';

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
