import type { ActivityDeps } from './activity-deps.js';
import { createGenerationActivities } from './generation-activities.js';
import { createHealthActivities } from './health-activities.js';
import { createReconciliationActivities } from './reconciliation-activities.js';

/** Every activity the worker registers, built from its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createHealthActivities(deps),
    ...createGenerationActivities(deps),
    ...createReconciliationActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
