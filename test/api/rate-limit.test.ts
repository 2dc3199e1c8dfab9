import { describe, expect, it } from 'vitest';
import { FixedWindowCounter } from '../../src/api/rate-limit.js';

describe('FixedWindowCounter', () => {
  it('allows `limit` hits per window, then refuses until the window resets', () => {
    let now = 1_000_000;
    const counter = new FixedWindowCounter(20, 60_000, () => now);
    for (let i = 0; i < 20; i++) expect(counter.hit('1.2.3.4').allowed).toBe(true);
    expect(counter.exhausted('1.2.3.4')).toEqual({ exhausted: true, retryAfterSeconds: 60 });
    now += 45_500;
    expect(counter.hit('1.2.3.4')).toEqual({ allowed: false, remaining: 0, retryAfterSeconds: 15 });
    expect(counter.exhausted('5.6.7.8').exhausted).toBe(false);
    now += 14_500; // a minute after the first hit
    expect(counter.exhausted('1.2.3.4').exhausted).toBe(false);
    expect(counter.hit('1.2.3.4')).toEqual({ allowed: true, remaining: 19, retryAfterSeconds: 60 });
  });
});
