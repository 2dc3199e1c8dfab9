/**
 * One read in flight per subject (a generation, an account), read again once it ends if a change
 * arrived meanwhile: a burst of notifications for one subject costs two reads, not one each, and no
 * change is missed (the read after it sees it). Shared by the hubs that notifications wake: the
 * waiters of `Prefer: wait` (GenerationWaiters) and the event streams (EventStreamHub).
 */
export class OneReadInFlight {
  /** Subjects being read now, and whether another change arrived meanwhile (read again). */
  private readonly reading = new Map<string, { again: boolean }>();

  constructor(
    private readonly options: {
      /** Whether anyone follows `subject` now: a change of a subject nobody follows is not read. */
      followed: (subject: string) => boolean;
      /**
       * Reads `subject` and hands the result over; handles its own failure (never rejects).
       * `readAgain` asks for one more read after this one (it could not read everything at once).
       */
      read: (subject: string, readAgain: () => void) => Promise<void>;
    },
  ) {}

  /** `subject` changed (its notification): it is read now, or again after the read in flight. */
  changed(subject: string): void {
    if (!this.options.followed(subject)) return;
    const inFlight = this.reading.get(subject);
    if (inFlight) {
      inFlight.again = true;
      return;
    }
    const state = { again: false };
    this.reading.set(subject, state);
    void this.options
      .read(subject, () => {
        state.again = true;
      })
      .finally(() => {
        this.reading.delete(subject);
        if (state.again) this.changed(subject);
      });
  }
}
