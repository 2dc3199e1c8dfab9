import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { FailOpenRedis } from '../dependencies/fail-open-redis.js';
import { MemoryBudgetStore } from './budget-memory-store.js';
import type { BudgetStore, TurnAnswer, TurnAsk } from './request-budget.js';

/**
 * One request's turn: decideTurn() (budget-memory-store.ts) on Redis's clock, atomically.
 * KEYS[1]: the allowance's turn (ms), KEYS[2]: the account's pause (a hash: `all`, `fallback`).
 * ARGV: emission ms (0: no limit), tolerance ms, the longest wait, the fallback share (-1: not a
 * fallback read). Returns {1, wait ms} (granted) or {0, ms until a turn could come} (refused).
 */
const takeTurn = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local maxWait = tonumber(ARGV[3])
local share = tonumber(ARGV[4])
local fallback = share >= 0
local paused = tonumber(redis.call('HGET', KEYS[2], fallback and 'fallback' or 'all') or '0')
if fallback and paused > now then return {0, math.ceil(paused - now)} end
local start = math.max(now, paused)
if emission <= 0 then
  local wait = start - now
  if wait > maxWait then return {0, math.ceil(wait)} end
  return {1, math.ceil(wait)}
end
local turn = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), start)
local wait = math.max(turn - tolerance, start) - now
if fallback then
  local over = turn + emission - now - share * (tolerance + emission)
  if over > 0.001 then return {0, math.ceil(over)} end
elseif wait > maxWait then
  return {0, math.ceil(wait)}
end
redis.call('SET', KEYS[1], string.format('%.3f', turn + emission), 'PX', math.ceil(turn + emission - now) + 1000)
return {1, math.ceil(wait)}
`;

/** A 429: KEYS[1] the account's pause; ARGV[1] ms. Every call waits that long, fallback reads twice. */
const pauseAccount = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local ms = tonumber(ARGV[1])
local all = math.max(tonumber(redis.call('HGET', KEYS[1], 'all') or '0'), now + ms)
local fallback = math.max(tonumber(redis.call('HGET', KEYS[1], 'fallback') or '0'), now + 2 * ms)
redis.call('HSET', KEYS[1], 'all', string.format('%.3f', all), 'fallback', string.format('%.3f', fallback))
redis.call('PEXPIRE', KEYS[1], math.ceil(fallback - now) + 1000)
return 1
`;

type BudgetClient = Redis & {
  budgetTakeTurn(
    turnKey: string,
    pauseKey: string,
    ...args: Array<string | number>
  ): Promise<[number, number]>;
  budgetPause(pauseKey: string, ms: number): Promise<number>;
};

/** The account's keys, in one hash slot (a cluster runs the script on one node). */
const keyOf = (provider: string, what: string) => `provider-budget:{${provider}}:${what}`;

/**
 * The providers' request budgets kept in Redis (or Valkey), when REDIS_URL is set: one script call
 * per request (EVALSHA), on Redis's own clock so that workers' clocks need not agree. While Redis
 * cannot be reached (refused, closed, slower than `commandTimeoutMs`), turns are answered from this
 * process's memory, as the API's rate limits are (OutageLog: one line when it goes, one when back).
 */
export class RedisBudgetStore implements BudgetStore {
  private readonly redis: FailOpenRedis<BudgetClient>;
  private readonly local = new MemoryBudgetStore();

  constructor(options: { url: string; commandTimeoutMs: number; logger: Logger }) {
    this.redis = new FailOpenRedis<BudgetClient>({
      ...options,
      connectionName: 'generation-worker-budgets',
      what: 'provider request budgets',
      scripts: {
        budgetTakeTurn: { lua: takeTurn, numberOfKeys: 2 },
        budgetPause: { lua: pauseAccount, numberOfKeys: 1 },
      },
    });
  }

  /** Resolves once connected, or after `ms` (until then turns are answered from memory). */
  ready(ms = 2_000): Promise<void> {
    return this.redis.ready(ms, false);
  }

  async take(ask: TurnAsk): Promise<TurnAnswer> {
    if (!this.redis.usable()) return this.local.take(ask);
    try {
      const [granted, ms] = await this.redis.client.budgetTakeTurn(
        keyOf(ask.provider, ask.budgetClass),
        keyOf(ask.provider, 'pause'),
        ask.pace?.emissionMs ?? 0,
        ask.pace?.toleranceMs ?? 0,
        ask.maxWaitMs,
        ask.fallbackShare ?? -1,
      );
      this.redis.answered();
      const wait = Math.max(0, Number(ms));
      return granted === 1 ? { granted: true, waitMs: wait } : { granted: false, retryAfterMs: wait };
    } catch (error) {
      this.redis.failed(error);
      return this.local.take(ask);
    }
  }

  async pause(provider: string, ms: number): Promise<void> {
    await this.local.pause(provider, ms);
    if (!this.redis.usable()) return;
    try {
      await this.redis.client.budgetPause(keyOf(provider, 'pause'), ms);
    } catch (error) {
      this.redis.failed(error);
    }
  }

  async close(): Promise<void> {
    this.redis.close();
    await this.local.close();
  }
}
