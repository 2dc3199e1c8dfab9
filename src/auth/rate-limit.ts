import { ApiError } from '../errors.js';

interface Window {
  startedAt: number;
  count: number;
}

// Asked on every authenticated request; almost always the answer.
const notExhausted = Object.freeze({ exhausted: false, retryAfterSeconds: 0 });

/**
 * Fixed one-minute windows counted in memory, per API process. Each window
 * resets a minute after its first hit; `retryAfterSeconds` tells a client when.
 *
 * Bounded whatever the callers send (a client rotating addresses makes a new
 * key per request): windows are kept in the order they started, so the ended
 * ones are always at the front and each new window drops those it finds
 * there; past `maxKeys` the oldest window goes too. Memory follows the keys
 * active in the last minute, at most `maxKeys` of them, and no request pays
 * for a sweep of the whole map.
 */
export class FixedWindowCounter {
  private readonly windows = new Map<string, Window>();
  /**
   * Every window as it started, oldest first, read from `head`. An array, not the map's own order:
   * V8 leaves deleted map entries in place until it rehashes, so iterating from a map's front after
   * many deletions walks all of them, and each hit would cost more the more were dropped.
   */
  private started: Array<[string, Window]> = [];
  private head = 0;

  constructor(
    readonly limit: number,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
    private readonly maxKeys = 100_000,
  ) {}

  /** Whether `key` has used up its window (without counting a hit). */
  exhausted(key: string): { exhausted: boolean; retryAfterSeconds: number } {
    const window = this.current(key);
    if (!window || window.count < this.limit) return notExhausted;
    return { exhausted: true, retryAfterSeconds: this.secondsLeft(window) };
  }

  /** Counts one hit; says whether it was within the limit, and what is left. */
  hit(key: string): { allowed: boolean; remaining: number; retryAfterSeconds: number } {
    const now = this.now();
    let window = this.current(key);
    if (!window) {
      window = { startedAt: now, count: 0 };
      this.windows.set(key, window);
      this.started.push([key, window]);
      this.dropOldest(now);
    }
    window.count += 1;
    const allowed = window.count <= this.limit;
    return {
      allowed,
      remaining: Math.max(0, this.limit - window.count),
      retryAfterSeconds: this.secondsLeft(window),
    };
  }

  private current(key: string) {
    const window = this.windows.get(key);
    if (!window || this.now() - window.startedAt >= this.windowMs) return undefined;
    return window;
  }

  private secondsLeft(window: { startedAt: number }): number {
    return Math.max(1, Math.ceil((window.startedAt + this.windowMs - this.now()) / 1000));
  }

  /** Drops the ended windows at the front, and the oldest beyond `maxKeys`; stops at the first to keep. */
  private dropOldest(now: number): void {
    while (this.head < this.started.length) {
      const [key, window] = this.started[this.head]!;
      const current = this.windows.get(key) === window; // else its key has started another since
      if (current && this.windows.size <= this.maxKeys && now - window.startedAt < this.windowMs) break;
      if (current) this.windows.delete(key);
      this.head += 1;
    }
    if (this.head > 1024 && this.head * 2 > this.started.length) {
      this.started = this.started.slice(this.head);
      this.head = 0;
    }
  }

  /** Keys with a window held (ended ones not yet dropped included). */
  get size(): number {
    return this.windows.size;
  }
}

/** The spec's limit on failed authentications: 20 per minute per client address. */
export const FAILED_AUTH_LIMIT_PER_MINUTE = 20;

/** The address is over its failed-authentication limit: a failed attempt from it is refused, nothing counted. */
interface Blocked {
  blocked: true;
  retryAfterSeconds: number;
}
/** One request counted against its key's budget. */
export interface KeyVerdict {
  allowed: boolean;
  remaining: number;
  retryAfterSeconds: number;
}
export type FailureVerdict = Blocked | { blocked: false };

/** What a key's 429 says of its budget (the API's answer; the console's pages go on from it). */
export const rateLimitWords = (requestsPerKey: number): string =>
  `Rate limit of ${requestsPerKey} requests per minute exceeded`;

/**
 * A request counted against its key's budget (`verdict`, from checkKey), as every door that counts
 * one judges it: undefined within the budget; past it, the API's 429 `rate_limited`, to be retried
 * when the key's window resets (Retry-After). The API's limits plugin answers with it; the console's
 * playground shows it, and logs it as the API would.
 */
export function keyRateLimitRefusal(requestsPerKey: number, verdict: KeyVerdict): ApiError | undefined {
  if (verdict.allowed) return undefined;
  return new ApiError('rate_limited', `${rateLimitWords(requestsPerKey)}.`, {
    retryAfterSeconds: verdict.retryAfterSeconds,
  });
}

/**
 * Where the auth plugin counts its two limits, both in fixed one-minute windows: failed
 * authentications per client address, and requests per API key. An answer may be synchronous (in
 * memory) or a promise (Redis), and never rejects: a store that cannot be reached answers from
 * memory instead (see RedisAuthLimits).
 *
 * The failed-authentication limit holds back failed attempts only: a key that authenticates is
 * counted against its own budget wherever it comes from, so that the customers behind one shared
 * address (a company's NAT, a cloud NAT gateway) are not locked out by one client that keeps failing.
 * Keys carry about 190 bits: the limit is there against load and noise, not against guessing.
 */
export interface AuthLimits {
  readonly requestsPerKey: number;
  /** A request whose key was accepted: one request counted against `keyId`, whatever its address's failures. */
  checkKey(keyId: string): KeyVerdict | Promise<KeyVerdict>;
  /**
   * A failed authentication: refused if `ip` is over its limit (counting nothing), else counted. `ip`
   * is whom the limit counts: the address, or an IPv6 client's network (failedAuthSubject); the
   * callers work it out, so that every store counts alike.
   */
  checkFailure(ip: string): FailureVerdict | Promise<FailureVerdict>;
  close(): Promise<void>;
}

const notBlocked = Object.freeze({ blocked: false as const });

/** Both limits counted in this process's memory: the default, and the fallback while Redis is away. */
export class MemoryAuthLimits implements AuthLimits {
  private readonly failures: FixedWindowCounter;
  private readonly requests: FixedWindowCounter;

  constructor(
    readonly requestsPerKey: number,
    failuresPerAddress = FAILED_AUTH_LIMIT_PER_MINUTE,
    now: () => number = Date.now,
  ) {
    this.failures = new FixedWindowCounter(failuresPerAddress, 60_000, now);
    this.requests = new FixedWindowCounter(requestsPerKey, 60_000, now);
  }

  checkKey(keyId: string): KeyVerdict {
    return this.requests.hit(keyId);
  }

  checkFailure(ip: string): FailureVerdict {
    const block = this.failures.exhausted(ip);
    if (block.exhausted) return { blocked: true, retryAfterSeconds: block.retryAfterSeconds };
    this.failures.hit(ip);
    return notBlocked;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
