import type { KeyHolder } from '../../db/idempotency-keys.js';
import type { StartOutcome } from './start-outcome.js';

/*
 * How a request is answered when its Idempotency-Key is already held, before anything new starts:
 * from the key's record in PostgreSQL (a generation still running answers through its workflow:
 * admit-update.ts).
 */

/**
 * A retry answered from the key's record, as its generation's workflow would answer it: another
 * body is a conflict whatever became of the first request; a refusal that claimed the key keeps its
 * error; a generation that has ended (succeeded or failed) is admitted as it now stands. One still
 * queued is left to its workflow (null): a retry then waits for the handover, as the first request did.
 */
export function answerFromRecord(holder: KeyHolder, fingerprint: string): StartOutcome | null {
  const { row } = holder;
  const generationId = row.id;
  if (holder.fingerprint !== fingerprint) return { outcome: 'conflict', generationId, inputPrefix: null };
  if (row.status === 'rejected' && row.error)
    return { outcome: 'rejected', generationId, error: row.error, inputPrefix: null };
  if (row.status === 'succeeded' || row.status === 'failed')
    return { outcome: 'admitted', generationId, known: row };
  return null;
}
