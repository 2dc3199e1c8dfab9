import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { FailOpenRedis } from '../dependencies/fail-open-redis.js';
import {
  FAILED_AUTH_LIMIT_PER_MINUTE,
  MemoryAuthLimits,
  type AuthLimits,
  type FailureVerdict,
  type KeyVerdict,
} from './rate-limit.js';

/**
 * The checks of one batch, atomically and in order: each adds one to the counter it names, starting
 * its window (PEXPIRE) on the first hit: the same fixed windows as MemoryAuthLimits, a window ending a
 * minute after its first hit. A failed authentication's check is first refused if its address is over
 * its limit (counting nothing); a key's request is counted whatever its address's failures.
 *
 * Check i: KEYS[2i-1] its address's failed authentications, KEYS[2i] the counter to add one to;
 * ARGV[2+i] '1' to refuse a blocked address first, '0' to count without that check. ARGV[1]: the
 * failed-authentication limit; ARGV[2]: the window (ms). Returns, per check, {-1, ms left of the
 * block} or {count after the hit, ms left of its window}, flattened.
 *
 * Each key is read once per batch and written once at the end (INCRBY what the batch added): a busy
 * key's or address's checks cost one GET and one PTTL per batch, not three calls per request. The
 * decisions are those of applying the checks one by one.
 */
const checkAndCount = `
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local value, ttl, fresh, added = {}, {}, {}, {}
local function load(key)
  if value[key] == nil then
    value[key] = tonumber(redis.call('GET', key) or '0')
    ttl[key] = redis.call('PTTL', key)
    fresh[key] = ttl[key] < 0
    if fresh[key] then ttl[key] = window end
    added[key] = 0
  end
end
local out = {}
for i = 1, #KEYS / 2 do
  local failures = KEYS[2 * i - 1]
  local counter = KEYS[2 * i]
  local refuse = false
  if ARGV[2 + i] == '1' then
    load(failures)
    refuse = value[failures] >= limit
  end
  if refuse then
    out[2 * i - 1] = -1
    out[2 * i] = ttl[failures]
  else
    load(counter)
    value[counter] = value[counter] + 1
    added[counter] = added[counter] + 1
    out[2 * i - 1] = value[counter]
    out[2 * i] = ttl[counter]
  end
end
for key, n in pairs(added) do
  if n > 0 then
    redis.call('INCRBY', key, n)
    if fresh[key] then redis.call('PEXPIRE', key, window) end
  end
end
return out
`;

const windowMs = 60_000;
/** Checks sent in one script call at most (the script holds Redis for its whole run). */
const maxBatch = 256;
/** How long start-up waits for the first connection before serving with in-memory limits. */
const startupWaitMs = 2_000;

interface RedisAuthLimitsOptions {
  url: string;
  requestsPerKey: number;
  /** A command not answered within this is abandoned, and the request counted in memory. */
  commandTimeoutMs: number;
  logger: Logger;
}

/** One request's check, waiting for its batch; settled with its [count, ttl], or null if Redis failed. */
interface PendingCheck {
  failuresKey: string;
  counterKey: string;
  /** '1': refused if the address is over its failed-authentication limit; '0': counted regardless. */
  refuseBlocked: '0' | '1';
  settle(reply: [number, number] | null): void;
}

type LimitsClient = Redis & {
  /** numberOfKeys, then the keys, then the arguments (see checkAndCount). */
  authLimitsCheck(...keysAndArgs: Array<string | number>): Promise<number[]>;
};

/**
 * Both limits counted in Redis (or Valkey), so that every API process shares them: N replicas together
 * allow what one would. Fails open, to this process's memory: while Redis cannot be
 * reached (refused, closed, or slower than `commandTimeoutMs`), each process counts on its own, as
 * without REDIS_URL, and says so in the log once (then once a minute, and again when Redis is back).
 * A request never waits for a Redis known to be away, and never fails because of it.
 */
export class RedisAuthLimits implements AuthLimits {
  private readonly redis: FailOpenRedis<LimitsClient>;
  private readonly local: MemoryAuthLimits;
  private queue: PendingCheck[] = [];
  private flushScheduled = false;

  readonly requestsPerKey: number;

  private constructor(options: RedisAuthLimitsOptions) {
    this.requestsPerKey = options.requestsPerKey;
    this.local = new MemoryAuthLimits(options.requestsPerKey);
    this.redis = new FailOpenRedis<LimitsClient>({
      url: options.url,
      commandTimeoutMs: options.commandTimeoutMs,
      logger: options.logger,
      connectionName: 'generation-api-limits',
      what: 'rate limits',
      scripts: { authLimitsCheck: { lua: checkAndCount } },
    });
  }

  /**
   * Connects and waits for the first connection a short while (so that the first requests are shared
   * too); an unreachable Redis does not stop the API from starting: it serves with in-memory limits
   * and keeps trying.
   */
  static async connect(options: RedisAuthLimitsOptions): Promise<RedisAuthLimits> {
    const limits = new RedisAuthLimits(options);
    await limits.redis.ready(startupWaitMs);
    return limits;
  }

  checkKey(keyId: string): KeyVerdict | Promise<KeyVerdict> {
    if (!this.redis.usable()) return this.local.checkKey(keyId);
    const counterKey = `ratelimit:key:${keyId}`;
    return new Promise((resolve) =>
      this.enqueue({
        failuresKey: counterKey, // not read: a key's request is not refused for its address's failures
        counterKey,
        refuseBlocked: '0',
        settle: (reply) => {
          if (!reply) return resolve(this.local.checkKey(keyId));
          const [count, ttl] = reply;
          resolve({
            allowed: count <= this.requestsPerKey,
            remaining: Math.max(0, this.requestsPerKey - count),
            retryAfterSeconds: seconds(ttl),
          });
        },
      }),
    );
  }

  checkFailure(ip: string): FailureVerdict | Promise<FailureVerdict> {
    if (!this.redis.usable()) return this.local.checkFailure(ip);
    const key = failuresKey(ip);
    return new Promise((resolve) =>
      this.enqueue({
        failuresKey: key,
        counterKey: key,
        refuseBlocked: '1',
        settle: (reply) => {
          if (!reply) return resolve(this.local.checkFailure(ip));
          const [count, ttl] = reply;
          resolve(count < 0 ? { blocked: true, retryAfterSeconds: seconds(ttl) } : { blocked: false });
        },
      }),
    );
  }

  /**
   * Checks wait for the end of the event-loop turn (setImmediate: after the sockets read in this turn
   * have had their requests parsed), then go to Redis in one script call per batch. Under load that is
   * one round trip, and one command for ioredis and for Redis to handle, for many requests; alone, a
   * request waits for nothing but its own round trip.
   */
  private enqueue(check: PendingCheck): void {
    this.queue.push(check);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    const queue = this.queue;
    this.queue = [];
    for (let start = 0; start < queue.length; start += maxBatch)
      this.send(queue.slice(start, start + maxBatch));
  };

  private send(batch: PendingCheck[]): void {
    const keys: string[] = [];
    const counts: string[] = [];
    for (const check of batch) {
      keys.push(check.failuresKey, check.counterKey);
      counts.push(check.refuseBlocked);
    }
    this.redis.client
      .authLimitsCheck(keys.length, ...keys, FAILED_AUTH_LIMIT_PER_MINUTE, windowMs, ...counts)
      .then(
        (reply) => {
          this.redis.answered();
          for (const [i, check] of batch.entries()) check.settle([reply[2 * i]!, reply[2 * i + 1]!]);
        },
        (error: unknown) => {
          this.redis.failed(error);
          for (const check of batch) check.settle(null);
        },
      );
  }

  async close(): Promise<void> {
    this.redis.close();
    await this.local.close();
  }
}

const failuresKey = (ip: string) => `ratelimit:failed-auth:${ip}`;
const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
