import { describe, expect, it } from 'vitest';
import { failedAuthSubject } from '../../src/auth/failed-auth-subject.js';
import { FixedWindowCounter, MemoryAuthLimits } from '../../src/auth/rate-limit.js';

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

describe('FixedWindowCounter under address rotation', () => {
  it('holds at most maxKeys windows, drops ended ones as new ones start, and keeps counting the live', () => {
    let now = 0;
    const counter = new FixedWindowCounter(20, 60_000, () => now, 1_000);
    for (let i = 0; i < 20; i++) counter.hit('steady');
    for (let i = 0; i < 100_000; i++) {
      counter.hit(`rotating-${i}`);
      if (i % 1000 === 0) now += 10;
    }
    // 100 000 addresses in a second: the map never held more than its bound.
    expect(counter.size).toBe(1_000);
    now = 61_000;
    counter.hit('after'); // every window has ended: they go as the next one starts
    expect(counter.size).toBe(1);
  });

  it('keeps a window that is still open when there is room', () => {
    let now = 0;
    const counter = new FixedWindowCounter(2, 60_000, () => now, 1_000);
    counter.hit('a');
    counter.hit('a');
    now = 30_000;
    for (let i = 0; i < 500; i++) counter.hit(`other-${i}`);
    expect(counter.exhausted('a').exhausted).toBe(true);
    now = 60_000;
    expect(counter.exhausted('a').exhausted).toBe(false);
    expect(counter.hit('a')).toMatchObject({ allowed: true, remaining: 1 });
  });
});

describe('failedAuthSubject', () => {
  it('counts IPv4 by address, IPv6 by network, mapped IPv4 as IPv4', () => {
    expect(failedAuthSubject('192.0.2.7', 64)).toBe('192.0.2.7');
    expect(failedAuthSubject('::ffff:192.0.2.7', 64)).toBe('192.0.2.7');
    expect(failedAuthSubject('2001:db8:1:2:aaaa:bbbb:cccc:dddd', 64)).toBe('2001:db8:1:2::/64');
    expect(failedAuthSubject('2001:DB8:1:2::1', 64)).toBe('2001:db8:1:2::/64');
    expect(failedAuthSubject('2001:db8:1:2::1', 48)).toBe('2001:db8:1::/48');
    expect(failedAuthSubject('2001:db8:1:2::1', 128)).toBe('2001:db8:1:2::1');
    expect(failedAuthSubject('not an address', 64)).toBe('not an address');
  });

  it('a client gone before its key was checked (no address left) is counted as unknown, not a crash', () => {
    // Fastify's request.ip is undefined once the socket is destroyed; this threw from inside the
    // limits' callback, an unhandled rejection that ends the process (seen with 500 open-and-close streams).
    expect(failedAuthSubject(undefined, 64)).toBe('unknown');
  });
});

describe('MemoryAuthLimits', () => {
  it('refuses failed attempts past the limit until the window ends; a key that works is only counted', () => {
    let now = 1_000_000;
    const limits = new MemoryAuthLimits(3, 2, () => now);
    expect(limits.checkKey('key_a')).toEqual({ allowed: true, remaining: 2, retryAfterSeconds: 60 });
    expect(limits.checkFailure('1.2.3.4')).toEqual({ blocked: false });
    now += 10_000;
    expect(limits.checkFailure('1.2.3.4')).toEqual({ blocked: false });
    // The third failure is refused, and so is every failure after it until the window ends...
    expect(limits.checkFailure('1.2.3.4')).toEqual({ blocked: true, retryAfterSeconds: 50 });
    expect(limits.checkFailure('1.2.3.4')).toEqual({ blocked: true, retryAfterSeconds: 50 });
    expect(limits.checkFailure('5.6.7.8')).toEqual({ blocked: false });
    // ...while a key that works is counted against its own budget only.
    expect(limits.checkKey('key_a')).toEqual({ allowed: true, remaining: 1, retryAfterSeconds: 50 });
    now += 50_000;
    expect(limits.checkFailure('1.2.3.4')).toEqual({ blocked: false });
  });
});
