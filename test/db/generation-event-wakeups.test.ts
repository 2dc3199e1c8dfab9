import { describe, expect, it } from 'vitest';
import { GenerationEventWakeups } from '../../src/db/generation-event-wakeups.js';

/** The worker's registry of readers waiting for a generation's next event (no database needed). */
describe('GenerationEventWakeups', () => {
  const timed = async (promise: Promise<void>) => {
    const started = performance.now();
    await promise;
    return performance.now() - started;
  };

  it("wakes a generation's readers on its notification, not other generations' readers", async () => {
    const wakeups = new GenerationEventWakeups({ listening: () => true });
    const a = wakeups.follow('gen_a');
    const b = wakeups.follow('gen_b');
    const waited = a.next(5_000);
    wakeups.changed('gen_a');
    expect(await timed(waited)).toBeLessThan(1_000);
    expect([a.woken, b.woken]).toEqual([true, false]);
    a.stop();
    b.stop();
    expect(wakeups.size).toBe(0);
  });

  it('remembers a notification that came between registering and waiting', async () => {
    const wakeups = new GenerationEventWakeups({ listening: () => true });
    const a = wakeups.follow('gen_a');
    wakeups.changed('gen_a');
    expect(await timed(a.next(5_000))).toBeLessThan(1_000);
    a.stop();
  });

  it('gives up waiting after the time asked, unwoken', async () => {
    const wakeups = new GenerationEventWakeups({ listening: () => true });
    const a = wakeups.follow('gen_a');
    expect(await timed(a.next(100))).toBeGreaterThanOrEqual(90);
    expect(a.woken).toBe(false);
    a.stop();
    // A stopped reader is no longer woken.
    wakeups.changed('gen_a');
    expect(a.woken).toBe(false);
  });

  it('wakes every reader when notifications may have been lost, and each second while away', async () => {
    let listening = false;
    const wakeups = new GenerationEventWakeups({ listening: () => listening });
    const a = wakeups.follow('gen_a');
    wakeups.recheckAll();
    expect(a.woken).toBe(true);
    a.stop();
    // Still away: a reader registered later is woken by the once-a-second recheck.
    const b = wakeups.follow('gen_b');
    expect(await timed(b.next(5_000))).toBeLessThan(2_000);
    listening = true;
    b.stop();
    wakeups.close();
  });
});
