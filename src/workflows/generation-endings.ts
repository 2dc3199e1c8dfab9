import { isCancellation, setCurrentDetails } from '@temporalio/workflow';
import type { GenerationError } from '../vocabulary/generation.js';
import { generationErrors } from './generation-errors.js';
import type { generationSteps } from './generation-steps.js';
import type { trackProgress } from './generation-progress.js';
import type { GenerationStart } from './generation-types.js';
import { isPermanent, isSettled } from './step-failures.js';

/**
 * How a generation ends without success, in the workflow: refunded and failed (its files
 * discarded), or found settled before this run. Only decisions and activity calls: no I/O.
 */
export function generationEndings(
  start: GenerationStart,
  steps: ReturnType<typeof generationSteps>,
  enter: ReturnType<typeof trackProgress>['enter'],
) {
  /** Failure after the debit: refund, retried until it commits (or its horizon), then failed; its files go. */
  async function fail(error: GenerationError): Promise<false> {
    enter('refunding', 'queued', `refunding: ${error.code}`);
    await steps.refund(start.generationId, error);
    enter('failed', 'failed', `failed: ${error.code} (refunded)`);
    await discardContent();
    return false;
  }

  /** A step gave up after the debit: refunded and failed, unless the generation was settled already. */
  async function giveUp(error: unknown, what: string): Promise<false> {
    if (isCancellation(error)) throw error;
    if (isSettled(error)) {
      settled();
      return false;
    }
    return fail(isPermanent(error) ? generationErrors.cannotComplete(what) : generationErrors.timedOut(what));
  }

  /** Already refunded before this run (a support reset): nothing is submitted, stored or refunded again. */
  function settled(): void {
    enter('failed', 'failed', 'already refunded; nothing more to do');
  }

  /**
   * A generation that ended without success keeps no files: inline inputs and partial outputs are
   * deleted (retried until the bookkeeping horizon, as expiry is). If that cannot complete, the
   * run says so for operators; the generation's outcome stands.
   */
  async function discardContent(): Promise<void> {
    try {
      await steps.discardContent(start.generationId);
    } catch (error) {
      if (isCancellation(error)) throw error;
      setCurrentDetails(`ended without success; its files could not be deleted: ${String(error)}`);
    }
  }

  /** A job we gave up on is stopped at the provider, so it neither runs on nor bills; best effort. */
  async function cancelAtProvider(jobId: string): Promise<void> {
    try {
      await steps.cancelJob(jobId, start.generationId);
    } catch (error) {
      if (isCancellation(error)) throw error;
      setCurrentDetails(`could not cancel provider job ${jobId}: ${String(error)}`);
    }
  }

  /**
   * Content expiry. If it cannot complete, the files stay and operators are told (the run then
   * holds the key open until its horizon, in operators' sight).
   */
  async function expire(): Promise<void> {
    try {
      await steps.expireContent(start.generationId);
      enter('expired', 'succeeded', 'content expired');
    } catch (error) {
      if (isCancellation(error)) throw error;
      enter('expiry_failed', 'succeeded', `content expiry failed; its files remain: ${String(error)}`, true);
    }
  }

  return { fail, giveUp, settled, discardContent, cancelAtProvider, expire };
}
