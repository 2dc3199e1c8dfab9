import { describe, expect, it } from 'vitest';
import { OneReadInFlight } from '../../src/api/one-read-in-flight.js';

/** A read that ends when the test says so. */
function controlledReads(followed: Set<string>) {
  const started: { subject: string; end: () => void; readAgain: () => void }[] = [];
  const reads = new OneReadInFlight({
    followed: (subject) => followed.has(subject),
    read: (subject, readAgain) =>
      new Promise<void>((end) => {
        started.push({ subject, end, readAgain });
      }),
  });
  return { reads, started };
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('OneReadInFlight (the waiters of Prefer: wait and the event streams)', () => {
  it('a burst of changes during a read costs one more read, per subject; an unfollowed subject is not read', async () => {
    const { reads, started } = controlledReads(new Set(['gen_a', 'gen_b']));
    reads.changed('gen_a');
    reads.changed('gen_a');
    reads.changed('gen_a');
    reads.changed('gen_b');
    reads.changed('gen_c');
    expect(started.map((r) => r.subject)).toEqual(['gen_a', 'gen_b']);

    started[0]!.end();
    await settled();
    expect(started.map((r) => r.subject)).toEqual(['gen_a', 'gen_b', 'gen_a']);
    started[1]!.end();
    started[2]!.end();
    await settled();
    expect(started).toHaveLength(3);
  });

  it('a read that asks for another (readAgain) is followed by one; a subject unfollowed meanwhile is not', async () => {
    const followed = new Set(['acct_1']);
    const { reads, started } = controlledReads(followed);
    reads.changed('acct_1');
    started[0]!.readAgain();
    started[0]!.end();
    await settled();
    expect(started).toHaveLength(2);

    reads.changed('acct_1');
    followed.delete('acct_1');
    started[1]!.end();
    await settled();
    expect(started).toHaveLength(2);
  });
});
