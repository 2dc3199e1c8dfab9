import { afterEach, describe, expect, it, vi } from 'vitest';
import { LineChanges } from '../../src/worker/batch-admission.js';

/** A batch slice waiting for its lines is woken by a change to one of them, and by nothing else. */
describe('LineChanges', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('wakes the waiters whose lines changed, and only them', async () => {
    vi.useFakeTimers();
    const changes = new LineChanges();
    const woken: string[] = [];
    const first = changes.wait(new Set(['gen_a', 'gen_b']), 60_000).then(() => woken.push('first'));
    const second = changes.wait(new Set(['gen_c']), 60_000).then(() => woken.push('second'));
    expect(changes.size).toBe(2);

    changes.changed('gen_x');
    changes.changed('gen_b');
    await first;
    expect(woken).toEqual(['first']);
    expect(changes.size).toBe(1);

    changes.changed('gen_c');
    await second;
    expect(woken).toEqual(['first', 'second']);
    expect(changes.size).toBe(0);
  });

  it('ends the wait after its timeout, leaving nothing behind', async () => {
    vi.useFakeTimers();
    const changes = new LineChanges();
    let done = false;
    const waiting = changes.wait(new Set(['gen_a']), 1_000).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await waiting;
    expect(done).toBe(true);
    expect(changes.size).toBe(0);
    // A change after the timeout wakes nobody and throws nothing.
    changes.changed('gen_a');
  });
});
