import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryAuthLimits, type AuthLimits } from '../../src/auth/rate-limit.js';
import { RedisAuthLimits } from '../../src/auth/redis-limits.js';
import type { RunningValkey } from '../../src/dev/valkey-server.js';
import { startTestRedis } from '../support/redis.js';

/**
 * Checks made in one event-loop turn go to Redis in one script call: their answers must be those of
 * the same checks made one at a time, in order, as MemoryAuthLimits gives them.
 */
describe('RedisAuthLimits, many checks in one batch', () => {
  let redis: RunningValkey;
  let limits: RedisAuthLimits;
  let peek: Redis;

  beforeAll(async () => {
    redis = await startTestRedis();
    limits = await RedisAuthLimits.connect({
      url: redis.url,
      requestsPerKey: 5,
      commandTimeoutMs: 1_000,
      logger: pino({ level: 'silent' }),
    });
    peek = new Redis(redis.url);
  });
  afterAll(async () => {
    peek?.disconnect();
    await limits?.close();
    await redis?.stop();
  });

  /** Script calls (EVALSHA, and EVAL when the script was not loaded yet) Redis has answered. */
  const scriptCalls = async () =>
    [...(await peek.info('commandstats')).matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );

  /** The same checks, all started in one turn, against `target`. */
  const burst = (target: AuthLimits, ip: string) =>
    Promise.all([
      ...Array.from({ length: 7 }, () => target.checkKey('key_burst')),
      ...Array.from({ length: 21 }, () => target.checkFailure(ip)),
      target.checkKey('key_other'),
      target.checkFailure(ip),
    ]);

  it('answers as the in-memory limits do for the same checks in order, and stores the counts', async () => {
    const memory = new MemoryAuthLimits(5);
    const expected = await burst(memory, '192.0.2.1');
    const before = await scriptCalls();
    const answers = await burst(limits, '192.0.2.1');
    const after = await scriptCalls();

    // Retry-After may differ by a second between the two clocks; everything else must match.
    const shape = (verdicts: typeof answers) =>
      verdicts.map((v) => ({ ...v, retryAfterSeconds: 'retryAfterSeconds' in v ? 'set' : 'none' }));
    expect(shape(answers)).toEqual(shape(expected));
    const keyAnswers = answers.slice(0, 7).map((v) => ('remaining' in v ? [v.remaining, v.allowed] : v));
    expect(keyAnswers).toEqual([
      [4, true],
      [3, true],
      [2, true],
      [1, true],
      [0, true],
      [0, false],
      [0, false],
    ]);
    // The 21st failure is refused; a key's request after it is counted, not refused; a failure after it is.
    expect(answers.slice(7, 28).map((v) => 'blocked' in v && v.blocked)).toEqual([
      ...Array<boolean>(20).fill(false),
      true,
    ]);
    expect(answers.slice(28)).toMatchObject([{ allowed: true, remaining: 4 }, { blocked: true }]);
    expect(after - before).toBe(1);

    expect(await peek.get('ratelimit:key:key_burst')).toBe('7');
    expect(await peek.get('ratelimit:failed-auth:192.0.2.1')).toBe('20');
    expect(await peek.get('ratelimit:key:key_other')).toBe('1');
    for (const key of ['ratelimit:key:key_burst', 'ratelimit:failed-auth:192.0.2.1']) {
      const ttl = await peek.pttl(key);
      expect(ttl).toBeGreaterThan(55_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
    }
  });

  it('a window already open keeps its expiry: later batches add to it without extending it', async () => {
    await limits.checkKey('key_window');
    await peek.pexpire('ratelimit:key:key_window', 30_000);
    const answers = await Promise.all([limits.checkKey('key_window'), limits.checkKey('key_window')]);
    expect(answers).toMatchObject([
      { allowed: true, remaining: 3, retryAfterSeconds: 30 },
      { allowed: true, remaining: 2, retryAfterSeconds: 30 },
    ]);
    expect(await peek.pttl('ratelimit:key:key_window')).toBeLessThanOrEqual(30_000);
  });
});
