import type { Logger } from 'pino';
import { MissedNotifications } from '../db/missed-notifications.js';
import type { GenerationRow } from '../db/generation-reads.js';
import { isTerminal } from './conditional-reads.js';
import { OneReadInFlight } from './one-read-in-flight.js';

/** At most this many requests wait (Prefer: wait) at once per API key, and per API process. */
export const waitersPerKey = 1_000;
export const waitersPerProcess = 10_000;
/** The longest a request may wait, in seconds (larger Prefer: wait values are clamped to it). */
export const maxWaitSeconds = 60;

/** Reads the waited generation as it stands now. */
type Reader = () => Promise<GenerationRow | null>;

interface Waiter {
  keyId: string;
  done: (row: GenerationRow | null) => void;
  /** Told each read of the generation that found it not terminal yet (an MCP call's progress). */
  seen?: (row: GenerationRow) => void;
}

/**
 * Requests held open until their generation is terminal (`Prefer: wait=N`), woken by the change
 * itself: PostgreSQL's `generation_changed` notification (one listening connection per process)
 * names the generation, and one read, shared by all its waiters, decides whether they are answered.
 * So a thousand waiters cost memory, not queries. While notifications are not arriving (the
 * listening connection dropped), the waited generations are read once a second instead, so a
 * waiter is still answered within about a second of the change.
 */
export class GenerationWaiters {
  /** The waiters of each generation, and how to read it (through the invalidated cache). */
  private readonly byGeneration = new Map<string, { waiters: Set<Waiter>; read: Reader }>();
  private readonly perKey = new Map<string, number>();
  private count = 0;
  private closing = false;
  /** One read of a generation at a time, shared by its waiters (again if it changed meanwhile). */
  private readonly reads = new OneReadInFlight({
    followed: (id) => this.byGeneration.has(id),
    read: (id) => this.answerIfTerminal(id),
  });
  private readonly missed = new MissedNotifications({
    listening: () => this.options.listening(),
    recheck: () => {
      for (const id of this.byGeneration.keys()) this.changed(id);
    },
  });

  constructor(
    private readonly options: {
      /** Whether change notifications are being received now. */
      listening: () => boolean;
      log: Logger;
      perKey?: number;
      perProcess?: number;
    },
  ) {}

  /** Requests waiting now. */
  get size(): number {
    return this.count;
  }

  /**
   * Resolves once generation `id` is terminal (with its row), or after `timeoutMs`, when the
   * client goes away (`signal`) or the process shuts down (with null: the caller reads the
   * current state). Past a cap it returns null and nothing waits: the preference is not honoured
   * (RFC 7240 makes every preference optional), and the caller answers at once. A refusal here
   * would come too late for a POST, whose generation is already started and charged. `seen` is
   * told every read that finds the generation not terminal yet (its status moved), from the same
   * shared read: following the progress costs no query of its own.
   */
  wait(
    id: string,
    keyId: string,
    timeoutMs: number,
    read: Reader,
    signal?: AbortSignal,
    seen?: (row: GenerationRow) => void,
  ): Promise<GenerationRow | null> | null {
    if (this.closing) return Promise.resolve(null);
    const forKey = this.perKey.get(keyId) ?? 0;
    if (forKey >= (this.options.perKey ?? waitersPerKey)) return null;
    if (this.count >= (this.options.perProcess ?? waitersPerProcess)) return null;
    return new Promise((resolve) => {
      let group = this.byGeneration.get(id);
      if (!group) this.byGeneration.set(id, (group = { waiters: new Set(), read }));
      const { waiters } = group;
      const timer = setTimeout(() => waiter.done(null), timeoutMs);
      const onAbort = () => waiter.done(null);
      const waiter: Waiter = {
        keyId,
        ...(seen && { seen }),
        done: (row) => {
          if (!waiters.delete(waiter)) return;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          if (waiters.size === 0 && this.byGeneration.get(id) === group) this.byGeneration.delete(id);
          const left = (this.perKey.get(keyId) ?? 1) - 1;
          if (left > 0) this.perKey.set(keyId, left);
          else this.perKey.delete(keyId);
          this.count -= 1;
          resolve(row);
        },
      };
      waiters.add(waiter);
      this.perKey.set(keyId, forKey + 1);
      this.count += 1;
      signal?.addEventListener('abort', onAbort, { once: true });
      // Registered first, read second: a change that lands between the caller's read and now
      // invalidated the cache before this read, and one that lands after it wakes this waiter.
      this.changed(id);
    });
  }

  /** A generation changed (its notification): its waiters are answered if it is now terminal. */
  changed(id: string): void {
    this.reads.changed(id);
  }

  private answerIfTerminal(id: string): Promise<void> {
    return this.byGeneration
      .get(id)!
      .read()
      .then(
        (row) => {
          const waiters = [...(this.byGeneration.get(id)?.waiters ?? [])];
          if (row && isTerminal(row.status)) for (const w of waiters) w.done(row);
          else if (row) for (const w of waiters) w.seen?.(row);
        },
        (error: unknown) =>
          this.options.log.warn({ err: error, generation_id: id }, 'a waited generation could not be read'),
      );
  }

  /**
   * Notifications may have been lost (the listening connection dropped, or came back): every
   * waited generation is read again, and once a second for as long as notifications are not arriving.
   */
  recheckAll(): void {
    this.missed.recheckAll();
  }

  /** Shutdown: every waiter is answered now (with the current state), and no request waits any more. */
  close(): void {
    this.closing = true;
    this.missed.stop();
    for (const { waiters } of [...this.byGeneration.values()]) for (const w of [...waiters]) w.done(null);
  }
}
