import { ApplicationFailure } from '@temporalio/activity';
import { DataIntegrityError, NotFoundError, SchemaValidationError } from 'slonik';
import { isDependencyFailure, sqlStateOf } from '../dependencies/failures.js';
import { PermanentError } from '../vocabulary/errors.js';
import { ProviderResultGone, ProviderTransientError } from '../providers/provider.js';
import { errorTypes } from '../workflows/generation-types.js';

/**
 * How an activity failure is told apart: whether another attempt could succeed. The workflow's
 * retry policies name the types that cannot (`errorTypes.permanent`, `errorTypes.invalidInput`),
 * and every step has a horizon for the ones that keep failing anyway. Classified here, in one
 * place: the failures an activity means (named below, each with its type and whether it is
 * retried), and classifyFailure for everything else an activity throws (the worker's interceptor).
 */

/** A step run for a generation refunded already (a support reset re-ran it): nothing more happens. */
export function settledFailure(generationId: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `generation ${generationId} was refunded already; it is not run again`,
    errorTypes.generationSettled,
  );
}

/**
 * Not now: another attempt holds the job (its submit claim), or the provider account's in-flight
 * places are taken. Retried after `retryAfter`, until the step's horizon.
 */
export function providerBusy(message: string, retryAfter: '1 second' | '2 seconds'): ApplicationFailure {
  return ApplicationFailure.create({ type: errorTypes.providerBusy, message, nextRetryDelay: retryAfter });
}

/**
 * The provider may have the job and cannot say (a create or a synchronous call whose answer was
 * lost): the workflow waits for support. `retryable`: the next attempt asks the provider again
 * (a lookup) before anything is sent; otherwise it is final.
 */
export function providerUncertain(
  message: string,
  { retryable }: { retryable: boolean },
): ApplicationFailure {
  return retryable
    ? ApplicationFailure.retryable(message, errorTypes.providerUncertain)
    : ApplicationFailure.nonRetryable(message, errorTypes.providerUncertain);
}

/**
 * The generation's Cancel-After deadline (`start.cancelAfter`) passed before any provider was sent
 * its job: nothing is sent, not retried; the workflow refunds it as canceled.
 */
export function cancelAfterPassed(deadline: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `the Cancel-After deadline ${deadline} passed before the job was handed to a provider`,
    errorTypes.cancelAfterPassed,
  );
}

/** The provider refused the job (nothing ran): not retried, refunded. */
export function providerRejected(message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, errorTypes.providerRejection);
}

/** A customer's reference image that cannot be used: not retried, and no provider is asked. */
export function referenceImageRefused(message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, errorTypes.referenceImageRefused);
}

/** The failure that tells the workflow to try the next route (its end is recorded first). */
export function routeNotAccepted(position: number, why: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`route ${position}: ${why}`, errorTypes.routeNotAccepted);
}

export const isRouteNotAccepted = (error: unknown): boolean =>
  error instanceof ApplicationFailure && error.type === errorTypes.routeNotAccepted;

/**
 * The failure an activity should report for `error`: ours as they are; data PostgreSQL refuses
 * (class 22) as invalid input; a bug or a broken invariant (integrity other than a unique race,
 * syntax or undefined objects, our functions' own RAISE, a row that does not match its schema, a
 * missing row) as permanent;
 * an unreachable dependency as such (retried); anything else unchanged (retried until the step's
 * horizon).
 */
export function classifyFailure(error: unknown): unknown {
  if (error instanceof ApplicationFailure) return error;
  const failure = (type: string) =>
    ApplicationFailure.create({
      type,
      message: error instanceof Error ? error.message : String(error),
      cause: error instanceof Error ? error : undefined,
    });
  if (error instanceof PermanentError || error instanceof ProviderResultGone)
    return failure(errorTypes.permanent);
  if (error instanceof ProviderTransientError && error.retryAfterMs !== undefined)
    // The provider said when to come back (429 Retry-After): the next attempt waits that long.
    return ApplicationFailure.create({
      type: error.name,
      message: error.message,
      nextRetryDelay: error.retryAfterMs,
    });
  if (isDependencyFailure(error)) return failure(errorTypes.dependencyUnavailable);
  const state = sqlStateOf(error);
  if (state?.startsWith('22')) return failure(errorTypes.invalidInput);
  if (state && /^(23(?!505)|42|0A|2B|39|3F|P0)/.test(state)) return failure(errorTypes.permanent);
  if (
    error instanceof SchemaValidationError ||
    error instanceof DataIntegrityError ||
    error instanceof NotFoundError
  )
    return failure(errorTypes.permanent);
  return error;
}
