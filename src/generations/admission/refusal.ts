import type { BaseLogger } from 'pino';
import { ApiError, admissionRefusal, idempotencyConflict } from '../../vocabulary/errors.js';
import type { Storage } from '../../storage/storage.js';
import type { StartOutcome } from './start-outcome.js';

/**
 * A request that reached admission and was refused there (another body under its Idempotency-Key,
 * or admission's refusal: credits, concurrency…): it names its generation, and the images it stored
 * have been deleted.
 */
export class GenerationRefused extends ApiError {
  readonly generationId: string;
  readonly outcome: 'conflict' | 'rejected';
  /**
   * The refusal's own code (a rejected generation's `error.code`), which `code` keeps only when the
   * API answers with it: `batch_canceled`, say, is answered as `invalid_request`.
   */
  readonly reason: string;

  constructor(refusal: Exclude<StartOutcome, { outcome: 'admitted' }>) {
    const error =
      refusal.outcome === 'conflict'
        ? idempotencyConflict(refusal.generationId)
        : admissionRefusal(refusal.error, refusal.generationId);
    super(error.code, error.message, error.extra);
    this.generationId = refusal.generationId;
    this.outcome = refusal.outcome;
    this.reason = refusal.outcome === 'rejected' ? refusal.error.code : error.code;
  }
}

/**
 * The error a request that will not run answers with. Its inline images are not kept: a conflict's
 * are its own (another fingerprint, another folder), a rejected generation's are never read.
 */
export async function refused(
  deps: { storage: Storage },
  refusal: Exclude<StartOutcome, { outcome: 'admitted' }>,
  log: Pick<BaseLogger, 'warn'>,
): Promise<GenerationRefused> {
  // The answer stands if the store fails: images left behind are never read, and the bucket's
  // lifecycle rule (docs/operating.md, Object storage) removes them in the end.
  if (refusal.inputPrefix)
    await deps.storage.deletePrefix(refusal.inputPrefix).catch((error: unknown) => {
      log.warn(
        { err: error, prefix: refusal.inputPrefix },
        "a refused request's inline images could not be deleted",
      );
    });
  return new GenerationRefused(refusal);
}
