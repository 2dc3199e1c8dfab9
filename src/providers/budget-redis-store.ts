import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { OutageLog } from '../auth/redis-outage-log.js';
import { redisAddress } from '../auth/redis-limits.js';
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

/** After a command fails while the connection looks up, Redis is left alone this long. */
const pauseAfterFailureMs = 1_000;

/** The account's keys, in one hash slot (a cluster runs the script on one node). */
const keyOf = (provider: string, what: string) => `provider-budget:{${provider}}:${what}`;

/**
 * The providers' request budgets kept in Redis (or Valkey), when REDIS_URL is set: one script call
 * per request (EVALSHA), on Redis's own clock so that workers' clocks need not agree. While Redis
 * cannot be reached (refused, closed, slower than `commandTimeoutMs`), turns are answered from this
 * process's memory, as the API's rate limits are (OutageLog: one line when it goes, one when back).
 */
export class RedisBudgetStore implements BudgetStore {
  private readonly client: BudgetClient;
  private readonly local = new MemoryBudgetStore();
  private readonly outage: OutageLog;
  private pausedUntil = 0;
  private closing = false;

  constructor(options: { url: string; commandTimeoutMs: number; logger: Logger }) {
    this.outage = new OutageLog(options.logger, redisAddress(options.url), 'provider request budgets');
    this.client = new Redis(options.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: Math.max(1_000, options.commandTimeoutMs * 4),
      retryStrategy: (attempt) => Math.min(100 * 2 ** Math.min(attempt, 5), 2_000),
      connectionName: 'generation-worker-budgets',
      scripts: {
        budgetTakeTurn: { lua: takeTurn, numberOfKeys: 2 },
        budgetPause: { lua: pauseAccount, numberOfKeys: 1 },
      },
    }) as BudgetClient;
    this.client.on('error', (error: Error) => this.outage.failed(error));
    this.client.on('close', () => {
      if (!this.closing) this.outage.failed(new Error('connection closed'));
    });
    this.client.on('ready', () => this.outage.recovered());
  }

  /** Resolves once connected, or after `ms` (until then turns are answered from memory). */
  async ready(ms = 2_000): Promise<void> {
    if (this.client.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.client.off('ready', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.client.once('ready', done);
    });
  }

  async take(ask: TurnAsk): Promise<TurnAnswer> {
    if (!this.usable()) return this.local.take(ask);
    try {
      const [granted, ms] = await this.client.budgetTakeTurn(
        keyOf(ask.provider, ask.budgetClass),
        keyOf(ask.provider, 'pause'),
        ask.pace?.emissionMs ?? 0,
        ask.pace?.toleranceMs ?? 0,
        ask.maxWaitMs,
        ask.fallbackShare ?? -1,
      );
      this.outage.recovered();
      const wait = Math.max(0, Number(ms));
      return granted === 1 ? { granted: true, waitMs: wait } : { granted: false, retryAfterMs: wait };
    } catch (error) {
      this.commandFailed(error);
      return this.local.take(ask);
    }
  }

  async pause(provider: string, ms: number): Promise<void> {
    await this.local.pause(provider, ms);
    if (!this.usable()) return;
    try {
      await this.client.budgetPause(keyOf(provider, 'pause'), ms);
    } catch (error) {
      this.commandFailed(error);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    this.outage.stop();
    this.client.disconnect();
    await this.local.close();
  }

  private usable(): boolean {
    if (this.client.status === 'ready' && Date.now() >= this.pausedUntil) return true;
    this.outage.countedLocally();
    return false;
  }

  private commandFailed(error: unknown): void {
    this.pausedUntil = Date.now() + pauseAfterFailureMs;
    this.outage.failed(error instanceof Error ? error : new Error(String(error)));
  }
}
