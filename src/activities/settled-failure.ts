import { ApplicationFailure } from '@temporalio/activity';
import { errorTypes } from '../workflows/generation-types.js';

/** The failure of a step run for a generation refunded already (a support reset re-ran it): nothing more happens. */
export function settledFailure(generationId: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `generation ${generationId} was refunded already; it is not run again`,
    errorTypes.generationSettled,
  );
}
