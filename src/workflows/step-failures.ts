import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import type { GenerationError } from '../vocabulary/generation.js';
import { debitErrors } from './generation-errors.js';
import { errorTypes, nonRetryableTypes } from './generation-types.js';

/**
 * Reading a step's failure in the workflow. A step fails for good either because an attempt said
 * retrying cannot help (an ApplicationFailure of a non-retryable type) or because it reached its
 * horizon (the last attempt's failure, or a timeout when an attempt was still running).
 */

/**
 * The ApplicationFailure behind a step's failure, if any: the cause of an ActivityFailure (or of
 * its timeout), or the failure itself when a local activity ran out of attempts (core resolves
 * those unwrapped).
 */
function applicationFailureOf(error: unknown): ApplicationFailure | undefined {
  let failure = error instanceof ActivityFailure ? error.cause : error;
  if (failure instanceof TimeoutFailure) failure = failure.cause;
  return failure instanceof ApplicationFailure ? failure : undefined;
}

/** The failure type behind a step's failure: an ApplicationFailure's type, or `timeout`. */
export function failureType(error: unknown): string | undefined {
  const application = applicationFailureOf(error);
  if (application) return application.type ?? undefined;
  const failure = error instanceof ActivityFailure ? error.cause : error;
  return failure instanceof TimeoutFailure ? 'timeout' : undefined;
}

/** What the failure behind a step's failure says (the activity's own message). */
export function failureMessage(error: unknown): string {
  return applicationFailureOf(error)?.message ?? (error instanceof Error ? error.message : String(error));
}

/** Whether the step failed because retrying cannot help (as opposed to reaching its horizon). */
export function isPermanent(error: unknown): boolean {
  const application = applicationFailureOf(error);
  return (
    application?.nonRetryable === true || (nonRetryableTypes as string[]).includes(application?.type ?? '')
  );
}

/** Whether the generation was already refunded (a reset re-ran it): nothing more may happen to it. */
export const isSettled = (error: unknown): boolean => failureType(error) === errorTypes.generationSettled;

/**
 * What the POST answers when the debit could not complete: bad data (400), a dependency down past
 * the debit's horizon (503), or a bug (500). None of these claims the key.
 */
export function debitFailure(error: unknown): GenerationError {
  const type = failureType(error);
  if (type === errorTypes.invalidInput) return debitErrors.invalidInput;
  if (type === errorTypes.dependencyUnavailable || type === 'timeout') return debitErrors.unavailable;
  return debitErrors.internal;
}
