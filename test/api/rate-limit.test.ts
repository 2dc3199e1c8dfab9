import { describe, expect, it } from 'vitest';
import { FixedWindowCounter, MemoryAuthLimits } from '../../src/api/rate-limit.js';

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

describe('MemoryAuthLimits', () => {
  it('refuses a blocked address before counting anything against the key', () => {
    let now = 1_000_000;
    const limits = new MemoryAuthLimits(3, 2, () => now);
    expect(limits.checkKey('1.2.3.4', 'key_a')).toEqual({
      blocked: false,
      allowed: true,
      remaining: 2,
      retryAfterSeconds: 60,
    });
    // Failures that do not count (a disabled account, say) never block.
    for (let i = 0; i < 5; i++) expect(limits.checkFailure('1.2.3.4', false)).toEqual({ blocked: false });
    expect(limits.checkFailure('1.2.3.4', true)).toEqual({ blocked: false });
    now += 10_000;
    expect(limits.checkFailure('1.2.3.4', true)).toEqual({ blocked: false });
    expect(limits.checkFailure('1.2.3.4', false)).toEqual({ blocked: true, retryAfterSeconds: 50 });
    expect(limits.checkKey('1.2.3.4', 'key_a')).toEqual({ blocked: true, retryAfterSeconds: 50 });
    // The refused request spent none of the key's budget: from elsewhere it has 1 of 3 used.
    expect(limits.checkKey('5.6.7.8', 'key_a')).toMatchObject({
      blocked: false,
      allowed: true,
      remaining: 1,
    });
  });
});
