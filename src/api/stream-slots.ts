import type { Logger } from 'pino';
import { MissedNotifications } from '../db/missed-notifications.js';

/** Whose a stream is: the key that opened it and its account. */
export interface StreamOwner {
  keyId: string;
  accountId: string;
}

/** Defaults of the caps (EVENT_STREAMS_PER_KEY, …_PER_ACCOUNT, …_PER_PROCESS): streams open at once per process. */
export const streamsPerKey = 1_000;
export const streamsPerAccount = 1_000;
export const streamsPerProcess = 10_000;

interface Slot {
  owner: StreamOwner;
  /** Ends the stream (its hub detaches it and ends the response). */
  end: () => void;
}

/**
 * The places for event streams in one API process (`GET /v1/generations/{id}/events` and
 * `GET /v1/events` share them), counted per key, per account and in all, and the rule that a
 * stream lives no longer than its key's right to read: whenever PostgreSQL announces a change to
 * an account's keys or access (`auth_changed`, on the process's one listening connection), the
 * keys of that account's open streams are looked up again, in one query, and the streams of a key
 * that may no longer call (revoked, access disabled, no paid purchase) are ended. A stream's key
 * is also looked up once just after it opens (a revocation between the request's authentication
 * and its slot would otherwise go unseen), and every key again while notifications may be lost.
 */
export class StreamSlots {
  private readonly slots = new Set<Slot>();
  private readonly perKey = new Map<string, number>();
  private readonly perAccount = new Map<string, number>();
  private closing = false;
  /** Keys to look up again, and whether a lookup is on its way. */
  private readonly toCheck = new Set<string>();
  private checking = false;
  private readonly missed = new MissedNotifications({
    listening: () => this.options.listening(),
    recheck: () => this.check([...this.slots].map((s) => s.owner.keyId)),
  });

  constructor(
    private readonly options: {
      perKey?: number;
      perAccount?: number;
      perProcess?: number;
      /** Of these keys, the ids of those that may still call (the authenticator's rule). */
      keysThatMayCall: (keyIds: string[]) => Promise<Set<string>>;
      listening: () => boolean;
      log: Logger;
    },
  ) {}

  /** Streams open now. */
  get size(): number {
    return this.slots.size;
  }

  /** Whether one more stream for this owner would be within the caps (checked before any work). */
  hasRoomFor(owner: StreamOwner): boolean {
    return (
      !this.closing &&
      (this.perKey.get(owner.keyId) ?? 0) < (this.options.perKey ?? streamsPerKey) &&
      (this.perAccount.get(owner.accountId) ?? 0) < (this.options.perAccount ?? streamsPerAccount) &&
      this.slots.size < (this.options.perProcess ?? streamsPerProcess)
    );
  }

  /**
   * Takes a place for a stream; `end` ends it when its key may no longer call. Returns the function
   * that gives the place back (idempotent), or null past a cap.
   */
  take(owner: StreamOwner, end: () => void): (() => void) | null {
    if (!this.hasRoomFor(owner)) return null;
    const slot: Slot = { owner, end };
    this.slots.add(slot);
    bump(this.perKey, owner.keyId, 1);
    bump(this.perAccount, owner.accountId, 1);
    this.check([owner.keyId]);
    return () => {
      if (!this.slots.delete(slot)) return;
      bump(this.perKey, owner.keyId, -1);
      bump(this.perAccount, owner.accountId, -1);
    };
  }

  /** The account's keys or access changed (`auth_changed`): its streams' keys are looked up again. */
  accountChanged(accountId: string): void {
    this.check([...this.slots].filter((s) => s.owner.accountId === accountId).map((s) => s.owner.keyId));
  }

  /** Notifications may have been lost: every stream's key is looked up again now, and each second while away. */
  recheckAll(): void {
    this.missed.recheckAll();
  }

  /** Shutdown: no place is given any more (the hubs end their streams). */
  close(): void {
    this.closing = true;
    this.missed.stop();
  }

  private check(keyIds: string[]): void {
    for (const id of keyIds) this.toCheck.add(id);
    if (this.checking || this.toCheck.size === 0 || this.closing) return;
    this.checking = true;
    // After this turn of the event loop: the keys of many streams opened at once are one query.
    setImmediate(() => void this.lookUp());
  }

  private async lookUp(): Promise<void> {
    const keyIds = [...this.toCheck];
    this.toCheck.clear();
    try {
      const allowed = await this.options.keysThatMayCall(keyIds);
      const refused = new Set(keyIds.filter((id) => !allowed.has(id)));
      for (const slot of [...this.slots]) if (refused.has(slot.owner.keyId)) slot.end();
    } catch (error) {
      this.options.log.warn(
        { err: error },
        'the keys of open event streams could not be checked; trying again',
      );
      // Looked up again in a second: a revoked key's stream is ended once PostgreSQL answers.
      for (const id of keyIds) this.toCheck.add(id);
      await new Promise((resolve) => setTimeout(resolve, 1000).unref());
    } finally {
      this.checking = false;
      this.check([]);
    }
  }
}

function bump(counts: Map<string, number>, key: string, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
