/**
 * A bounded set of key hashes, each kept until `ttlMs` after it was added. Additions are queued
 * oldest first, so the expired ones are always at the front and are dropped a few at a time as new
 * ones arrive: memory follows the hashes seen lately, at most `maxEntries` of them, with no sweep
 * over the whole set on any request. (A queue beside the map, not the map's own order: V8 keeps
 * deleted entries in a map until it rehashes, and walking its front would walk them all.)
 */
export class RecentHashes {
  private readonly addedAt = new Map<string, number>();
  private added: Array<[string, number]> = [];
  private head = 0;

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
    this.addedAt.set(hash, now);
    this.added.push([hash, now]);
    while (this.head < this.added.length) {
      const [oldest, at] = this.added[this.head]!;
      const current = this.addedAt.get(oldest) === at; // else added again since
      if (current && this.addedAt.size <= this.maxEntries && now - at < this.ttlMs) break;
      if (current) this.addedAt.delete(oldest);
      this.head += 1;
    }
    if (this.head > 1024 && this.head * 2 > this.added.length) {
      this.added = this.added.slice(this.head);
      this.head = 0;
    }
  }

  clear(): void {
    this.addedAt.clear();
    this.added = [];
    this.head = 0;
  }

  get size(): number {
    return this.addedAt.size;
  }
}
