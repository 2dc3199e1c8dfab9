import { ApplicationFailure } from '@temporalio/activity';
import { DataIntegrityError, NotFoundError, SchemaValidationError } from 'slonik';
import { isDependencyFailure, sqlStateOf } from '../dependency-failures.js';
import { PermanentError } from '../errors.js';
import { ProviderResultGone, ProviderTransientError } from '../providers/provider.js';
import { errorTypes } from '../workflows/generation-types.js';

/**
 * How an activity failure is told apart: whether another attempt could succeed. The workflow's
 * retry policies name the types that cannot (`errorTypes.permanent`, `errorTypes.invalidInput`),
 * and every step has a horizon for the ones that keep failing anyway.
 */

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
