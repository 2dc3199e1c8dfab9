import type { Client } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';
import type { GenerationRow } from '../db/generation-reads.js';
import type { GenerationError } from '../generation.js';
import type { Storage } from '../storage/storage.js';
import type { GenerationStart } from '../workflows/generation-types.js';

/* What startGeneration (start-generation.ts) is given and answers. */

export interface StartGenerationDeps {
  /** Where Idempotency-Key records are read (see keyHolder). */
  db: CommonQueryMethods;
  temporal: Client;
  taskQueue: string;
  storage: Storage;
  /** How long POST waits for admission and handover before answering 503 (the key stays claimed; a retry gets the outcome). */
  admissionTimeoutMs: number;
  timing: GenerationStart['timing'];
  /** Now, in ms: the request's creation time and the key horizon are judged by it (default Date.now). */
  clock?: () => number;
}

/**
 * How the request ended at admission, and the generation that answers it: a new one, or for a
 * retry with an Idempotency-Key the one the key already names. A conflict is checked first: a
 * retry with another body learns of that whatever became of the first request. A request that
 * will not run names the folder of the inline images it stored, if any, for the caller to delete.
 */
export type StartOutcome =
  | {
      outcome: 'admitted';
      generationId: string;
      /**
       * The generation as this request last knew it (what admission made of a new one: queued and
       * debited; an earlier one as its key's record showed it), for the caller to answer with when
       * it cannot read the generation: an admitted request is answered with its generation, never
       * with an error, since it may be charged.
       */
      known: GenerationRow;
    }
  | { outcome: 'conflict'; generationId: string; inputPrefix: string | null }
  | { outcome: 'rejected'; generationId: string; error: GenerationError; inputPrefix: string | null };
