/**
 * The work a background loop has started and not finished (a reload, a probe), so that its owner can
 * stop it and wait for what runs: a process that ends its database pool while a reload is still
 * querying it logs that reload as failed, though nothing went wrong but the order of its stop.
 * Once `stop` is called, `run` starts nothing more.
 */
export class InFlight {
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;

  /** Runs `work` unless stopped (then resolves to undefined, having started nothing). */
  run<T>(work: () => Promise<T>): Promise<T | undefined> {
    if (this.stopped) return Promise.resolve(undefined);
    const started = work();
    this.running.add(started);
    const forget = () => void this.running.delete(started);
    started.then(forget, forget);
    return started;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Starts nothing more; resolves once what was running has settled (its failures are its own to report). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([...this.running]);
  }
}
