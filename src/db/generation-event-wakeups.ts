import { MissedNotifications } from './missed-notifications.js';

/** One waiting reader of a generation's event log, registered before it reads. */
export interface EventWakeup {
  /** Whether a new event (or a possible loss of notifications) came since it was registered. */
  readonly woken: boolean;
  /** Resolves when woken (at once if it was already), or after `ms`. */
  next(ms: number): Promise<void>;
  /** Unregisters it (always call it, woken or not). */
  stop(): void;
}

interface Follower {
  woken: boolean;
  resolve: (() => void) | null;
}

/**
 * The worker process's readers waiting for a generation's next event (the webhook deliveries' look
 * for their next events), woken by the `generation_event` notification on the process's one
 * listening connection instead of each polling the log: a waiting delivery costs a timer, not
 * queries. When notifications may have been lost (the connection dropped or came back) every
 * follower is woken, and once a second while they are not arriving; a reader still re-reads on
 * its own now and then, so a lost notification delays it and never loses an event.
 */
export class GenerationEventWakeups {
  private readonly byGeneration = new Map<string, Set<Follower>>();
  private readonly missed = new MissedNotifications({
    listening: () => this.options.listening(),
    recheck: () => {
      for (const followers of this.byGeneration.values()) for (const f of followers) wake(f);
    },
  });

  constructor(
    private readonly options: {
      /** Whether the listening connection is up (notifications arrive). */
      listening: () => boolean;
    },
  ) {}

  /** Readers registered now. */
  get size(): number {
    let n = 0;
    for (const followers of this.byGeneration.values()) n += followers.size;
    return n;
  }

  /**
   * Registers a reader of generation `generationId`: register first, read the log second, then
   * wait with `next`, so that an event committed after the read wakes it.
   */
  follow(generationId: string): EventWakeup {
    const follower: Follower = { woken: false, resolve: null };
    let followers = this.byGeneration.get(generationId);
    if (!followers) this.byGeneration.set(generationId, (followers = new Set()));
    followers.add(follower);
    return {
      get woken() {
        return follower.woken;
      },
      next: (ms) =>
        follower.woken
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              const timer = setTimeout(done, ms);
              function done() {
                clearTimeout(timer);
                follower.resolve = null;
                resolve();
              }
              follower.resolve = done;
            }),
      stop: () => {
        const set = this.byGeneration.get(generationId);
        if (!set?.delete(follower)) return;
        if (set.size === 0) this.byGeneration.delete(generationId);
        follower.resolve?.();
      },
    };
  }

  /** Generation `id` has a new event (its notification): its readers wake and read. */
  changed(id: string): void {
    for (const follower of this.byGeneration.get(id) ?? []) wake(follower);
  }

  /** Notifications may have been lost: every reader wakes now, and once a second while away. */
  recheckAll(): void {
    this.missed.recheckAll();
  }

  /** Shutdown: no more rechecks. */
  close(): void {
    this.missed.stop();
  }
}

function wake(follower: Follower): void {
  follower.woken = true;
  follower.resolve?.();
}
