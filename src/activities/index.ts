import type { ActivityDeps } from './activity-deps.js';
import { createCancelActivities } from './cancel-activities.js';
import { createGenerationActivities } from './generation-activities.js';
import { createPruningActivities } from './pruning-activities.js';
import { createReconciliationActivities } from './reconciliation-activities.js';
import { createThumbnailActivities } from './thumbnail-activities.js';
import { createWebhookActivities } from './webhook-activities.js';

/** Every activity the worker registers, built from its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createGenerationActivities(deps),
    ...createCancelActivities(deps),
    ...createReconciliationActivities(deps),
    ...createPruningActivities(deps),
    ...createThumbnailActivities(deps),
    ...createWebhookActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
