import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningValkey } from '../../src/dev/valkey-server.js';
import { createDatabasePool, type DatabasePool } from '../../src/db/pool.js';
import { PostgresBudgetStore } from '../../src/providers/budget-postgres-store.js';
import { createLogger } from '../../src/process/logger.js';
import { MemoryBudgetStore } from '../../src/providers/budget-memory-store.js';
import { RedisBudgetStore } from '../../src/providers/budget-redis-store.js';
import { paceOf, type BudgetStore, type TurnAsk } from '../../src/providers/request-budget.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestRedis } from '../support/redis.js';

/**
 * The request budget's two shared stores, each used by two instances (two workers, each with its
 * own connection): one schedule and one pause per provider account, whichever worker asks.
 */
describe.each(['postgres', 'redis'] as const)('the request budget kept in %s', (where) => {
  let db: TestDatabase;
  let secondPool: DatabasePool | undefined;
  let redis: RunningValkey | undefined;
  let a: BudgetStore;
  let b: BudgetStore;

  beforeAll(async () => {
    if (where === 'postgres') {
      db = await createTestDatabase();
      secondPool = await createDatabasePool(db.url, { maximumPoolSize: 2 });
      a = new PostgresBudgetStore(db.pool);
      b = new PostgresBudgetStore(secondPool);
    } else {
      redis = await startTestRedis();
      const logger = createLogger('budget-test', 'silent');
      const [first, second] = [0, 1].map(
        () => new RedisBudgetStore({ url: redis!.url, commandTimeoutMs: 1_000, logger }),
      );
      await Promise.all([first!.ready(), second!.ready()]);
      [a, b] = [first!, second!];
    }
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await secondPool?.end();
    await db?.drop();
    await redis?.stop();
  });

  // 20 a minute: a burst of 2, then one turn every 3,333 ms (18 a minute), so no minute holds more than 20.
  const pace = paceOf(20)!;
  const ask = (provider: string, extra: Partial<TurnAsk> = {}): TurnAsk => ({
    provider,
    budgetClass: 'other',
    pace,
    maxWaitMs: 60_000,
    ...extra,
  });

  it('hands out one sequence of turns to both workers, and refuses a turn past its wait', async () => {
    expect(pace.emissionMs).toBeCloseTo(60_000 / 18);
    const started = Date.now();
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const answer = await (i % 2 === 0 ? a : b).take(ask(`${where}-shared`));
      expect(answer.granted).toBe(true);
      if (answer.granted) waits.push(answer.waitMs + (Date.now() - started));
    }
    // Turn i (from 0) comes at (i - 1) × 3,333 ms from the first: the burst's two at once, then one
    // per emission, whichever worker asked (a worker of its own would start at 0 again).
    const expected = [0, 0, 1, 2, 3, 4, 5, 6].map((n) => n * pace.emissionMs);
    waits.forEach((wait, i) => expect(Math.abs(wait - expected[i]!)).toBeLessThan(400));
    // The next would wait 7 emissions (23 s): past its wait it is refused, and takes nothing.
    const refused = await a.take(ask(`${where}-shared`, { maxWaitMs: 1_000 }));
    expect(refused).toMatchObject({ granted: false });
    if (!refused.granted) expect(Math.abs(refused.retryAfterMs - 7 * pace.emissionMs)).toBeLessThan(400);
    const again = await b.take(ask(`${where}-shared`));
    expect(
      again.granted && Math.abs(again.waitMs + (Date.now() - started) - 7 * pace.emissionMs),
    ).toBeLessThan(400);
  });

  it('lets a fallback read through only while the backlog is under its share; other reads still go', async () => {
    const fallback = { fallbackShare: 0.5, maxWaitMs: 0 };
    // An idle account: the fallback read goes.
    expect(await a.take(ask(`${where}-fallback`, fallback))).toEqual({ granted: true, waitMs: 0 });
    // Half the burst used: the next fallback read gives way (on either worker), nothing taken …
    const skipped = await b.take(ask(`${where}-fallback`, fallback));
    expect(skipped).toMatchObject({ granted: false });
    if (!skipped.granted) expect(skipped.retryAfterMs).toBeGreaterThan(pace.emissionMs / 2);
    // … while a pushed read still has its turn at once (the burst's second), then waits its turn.
    expect(await a.take(ask(`${where}-fallback`, { maxWaitMs: 0 }))).toEqual({ granted: true, waitMs: 0 });
    expect(await b.take(ask(`${where}-fallback`, { maxWaitMs: 0 }))).toMatchObject({ granted: false });
    // Creates are an allowance of their own.
    expect(await b.take(ask(`${where}-fallback`, { budgetClass: 'create', maxWaitMs: 0 }))).toEqual({
      granted: true,
      waitMs: 0,
    });
  });

  it('pauses every worker after a 429: reads wait it out or are refused, fallback reads twice as long', async () => {
    await a.pause(`${where}-paused`, 1_500);
    const unlimited = { pace: null };
    const waited = await b.take(ask(`${where}-paused`, { ...unlimited, maxWaitMs: 5_000 }));
    expect(waited.granted && waited.waitMs).toBeGreaterThan(1_200);
    const refused = await b.take(ask(`${where}-paused`, { ...unlimited, maxWaitMs: 500 }));
    expect(refused.granted || refused.retryAfterMs).toBeGreaterThan(1_200);
    const fallback = await b.take(ask(`${where}-paused`, { ...unlimited, fallbackShare: 0.5, maxWaitMs: 0 }));
    expect(fallback.granted || fallback.retryAfterMs).toBeGreaterThan(2_700);
    // Scheduled turns start from the pause's end, not from now.
    const create = await b.take(ask(`${where}-paused`, { budgetClass: 'create', maxWaitMs: 5_000 }));
    expect(create.granted && create.waitMs).toBeGreaterThan(1_200);
    // A shorter 429 later never shortens a pause.
    await b.pause(`${where}-paused`, 10);
    const still = await a.take(ask(`${where}-paused`, { ...unlimited, maxWaitMs: 0 }));
    expect(still.granted || still.retryAfterMs).toBeGreaterThan(1_000);
  });
});

describe('the request budget in memory (a worker alone, or while its store is away)', () => {
  it('keeps the same rule', async () => {
    let now = 1_000_000;
    const store = new MemoryBudgetStore(() => now);
    const pace = paceOf(20)!;
    const ask: TurnAsk = { provider: 'p', budgetClass: 'other', pace, maxWaitMs: 60_000 };
    const waits = [];
    for (let i = 0; i < 4; i++) waits.push(await store.take(ask));
    const rounded = waits.map((w) => (w.granted ? Math.round(w.waitMs) : w));
    expect(rounded).toEqual([0, 0, 1, 2].map((n) => Math.round(n * pace.emissionMs)));
    now += 10 * pace.emissionMs;
    expect(await store.take({ ...ask, fallbackShare: 0.5, maxWaitMs: 0 })).toEqual({
      granted: true,
      waitMs: 0,
    });
    await store.pause('p', 1_000);
    expect(await store.take({ ...ask, fallbackShare: 0.5, maxWaitMs: 0 })).toEqual({
      granted: false,
      retryAfterMs: 2_000,
    });
  });
});
