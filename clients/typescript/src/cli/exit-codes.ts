import {
  AbortedError,
  AuthenticationError,
  BatchWaitTimeoutError,
  ConnectionError,
  GenerationFailedError,
  GenerationRejectedError,
  InsufficientCreditsError,
  MissingApiKeyError,
  PermissionDeniedError,
  WaitTimeoutError,
} from '../core/errors.js';

/** gen's exit codes: documented in the package README; scripts branch on them. */
export const exitCodes = {
  done: 0,
  error: 1,
  usage: 2,
  auth: 3,
  credits: 4,
  failed: 5,
  rejected: 6,
  stillRunning: 7,
  interrupted: 130,
} as const;

/** A mistake on the command line (exit 2). */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** More than --max-credits, or more than the balance (exit 4). */
export class TooDearError extends Error {
  override name = 'TooDearError';
}

/** A batch still running when gen batch's --timeout passed (exit 7, like a generation's wait). */
export class BatchStillRunningError extends Error {
  override name = 'BatchStillRunningError';
}

export function exitCodeOf(error: unknown): number {
  if (error instanceof UsageError) return exitCodes.usage;
  if (
    error instanceof AuthenticationError ||
    error instanceof PermissionDeniedError ||
    error instanceof MissingApiKeyError
  )
    return exitCodes.auth;
  if (error instanceof InsufficientCreditsError || error instanceof TooDearError) return exitCodes.credits;
  if (error instanceof GenerationRejectedError)
    return error.code === 'insufficient_credits' ? exitCodes.credits : exitCodes.rejected;
  // The provider refused the job (it ran nothing, and it was refunded): rejected, though its status is failed.
  if (error instanceof GenerationFailedError)
    return error.code === 'provider_rejected' ? exitCodes.rejected : exitCodes.failed;
  if (
    error instanceof WaitTimeoutError ||
    error instanceof BatchWaitTimeoutError ||
    error instanceof BatchStillRunningError
  )
    return exitCodes.stillRunning;
  if (error instanceof AbortedError) return exitCodes.interrupted;
  if (error instanceof ConnectionError) return exitCodes.error;
  return exitCodes.error;
}
