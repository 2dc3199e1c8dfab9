// Asked on every authenticated request; almost always the answer.
const notExhausted = Object.freeze({ exhausted: false, retryAfterSeconds: 0 });

/**
 * Fixed one-minute windows counted in memory, per API process. Each window
 * resets a minute after its first hit; `retryAfterSeconds` tells a client when.
 */
export class FixedWindowCounter {
  private readonly windows = new Map<string, { startedAt: number; count: number }>();
  private lastSweep = 0;

  constructor(
    readonly limit: number,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
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
    this.sweep(now);
    let window = this.current(key);
    if (!window) {
      window = { startedAt: now, count: 0 };
      this.windows.set(key, window);
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

  /** Drops finished windows now and then, so memory follows the active keys only. */
  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [key, window] of this.windows)
      if (now - window.startedAt >= this.windowMs) this.windows.delete(key);
  }
}
