import type { BatchLineInput } from '../db/batch-lines.js';

/**
 * How a batch's line is admitted and a running one stopped: through the admission every front door
 * uses (admitGeneration) and the generation cancel rules. The worker builds it (it sits above
 * admission on the layout), so these activities stay below it.
 */
export interface BatchLineAdmission {
  /**
   * Admits one line with the Idempotency-Key `<batch id>:<line>` (a second call meets the first's
   * generation): `started` with its generation (accepted, or refused at admission and recorded,
   * such as `insufficient_credits`), `refused` without one, or `later` (admission could not decide
   * now: a provider down, Temporal slow), which leaves the line pending.
   */
  admit(line: {
    accountId: string;
    apiKeyId: string;
    batchId: string;
    line: BatchLineInput;
  }): Promise<
    | { outcome: 'started'; generationId: string }
    | { outcome: 'refused'; error: { code: string; message: string } }
    | { outcome: 'later' }
  >;
  /** Asks a running line's generation to stop under the generation cancel rules. */
  cancel(generationId: string, accountId: string): Promise<void>;
  /**
   * Resolves when one of `generationIds` changes (PostgreSQL's `generation_changed`), or after
   * `timeoutMs`: a slice waiting for its lines to end wakes when one does, not at its next poll.
   * Only a wake-up: the slice reads the lines again either way. Without it, the slice polls.
   */
  waitForChange?(generationIds: ReadonlySet<string>, timeoutMs: number): Promise<void>;
}

/**
 * How often a slice looks in PostgreSQL, how long it runs before reporting, and how long a line
 * whose admission could not be decided waits before it is tried again (absent: 10 s).
 */
export interface BatchTiming {
  pollIntervalMs: number;
  sliceMs: number;
  laterRetryMs?: number;
}
