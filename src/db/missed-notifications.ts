/**
 * What a hub woken by PostgreSQL's notifications (the API's waiters of `Prefer: wait` and event
 * streams, the worker's waiting webhook deliveries) does when notifications may have been lost: the
 * listening connection dropped, or came back. It reads every generation it follows again at once,
 * and then once a second for as long as notifications are not arriving.
 */
export class MissedNotifications {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly options: {
      /** Whether the listening connection is up (notifications arrive). */
      listening: () => boolean;
      /** Reads every followed generation again. */
      recheck: () => void;
    },
  ) {}

  /** Notifications may have been lost: recheck now, and every second until they arrive again. */
  recheckAll(): void {
    this.options.recheck();
    if (this.options.listening() || this.timer || this.stopped) return;
    this.timer = setInterval(() => {
      this.options.recheck();
      if (this.options.listening()) this.clear();
    }, 1000);
    this.timer.unref();
  }

  /** Shutdown: no more rechecks. */
  stop(): void {
    this.stopped = true;
    this.clear();
  }

  private clear(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
