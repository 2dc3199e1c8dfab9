/**
 * An in-process cache whose entries are dropped when PostgreSQL announces a
 * change (LISTEN/NOTIFY), with a TTL as a safety net. While the change feed is
 * down (`enabled()` false) it is bypassed entirely. A value loaded while an
 * invalidation arrived may predate that change, so it is not stored.
 */
export class InvalidatedCache<K, V> {
  private readonly entries = new Map<K, { value: V; expiresAt: number }>();
  private epoch = 0;

  constructor(private readonly options: { ttlMs: number; enabled: () => boolean; maxEntries?: number }) {}

  /** The cached value, if there is a fresh one (no promise: the hot path stays synchronous). */
  peek(key: K): V | undefined {
    if (this.options.ttlMs <= 0 || !this.options.enabled()) return undefined;
    const hit = this.entries.get(key);
    return hit && hit.expiresAt > Date.now() ? hit.value : undefined;
  }

  /** The cached value, or `load()`'s; `keep` decides whether a loaded value may be cached. */
  async get(key: K, load: (key: K) => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    const usable = this.options.ttlMs > 0 && this.options.enabled();
    if (usable) {
      const hit = this.entries.get(key);
      if (hit && hit.expiresAt > Date.now()) return hit.value;
    }
    const epoch = this.epoch;
    const value = await load(key);
    if (usable && epoch === this.epoch && keep(value)) {
      if (this.entries.size >= (this.options.maxEntries ?? 100_000)) this.entries.clear();
      this.entries.set(key, { value, expiresAt: Date.now() + this.options.ttlMs });
    }
    return value;
  }

  invalidate(key: K): void {
    this.epoch += 1;
    this.entries.delete(key);
  }

  invalidateAll(): void {
    this.epoch += 1;
    this.entries.clear();
  }
}
