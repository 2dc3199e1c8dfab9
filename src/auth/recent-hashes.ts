/**
 * A bounded set of key hashes, each kept until `ttlMs` after it was added (Infinity: until pushed
 * out). Entries sit in the order they were added, so the expired ones are always at the front and
 * are dropped a few at a time as new ones arrive: memory follows the hashes seen lately, at most
 * `maxEntries` of them, with no sweep over the whole set on any request.
 */
export class RecentHashes {
  private readonly addedAt = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  has(hash: string): boolean {
    const at = this.addedAt.get(hash);
    return at !== undefined && this.now() - at < this.ttlMs;
  }

  add(hash: string): void {
    if (this.ttlMs <= 0) return;
    const now = this.now();
    this.addedAt.delete(hash); // re-added: to the back, with its new time
    this.addedAt.set(hash, now);
    for (const [oldest, at] of this.addedAt) {
      if (this.addedAt.size <= this.maxEntries && now - at < this.ttlMs) break;
      this.addedAt.delete(oldest);
    }
  }

  clear(): void {
    this.addedAt.clear();
  }

  get size(): number {
    return this.addedAt.size;
  }
}
