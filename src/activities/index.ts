import type { StoredOutput } from '../db/generation-results.js';
import type { ProviderResult } from '../providers/provider.js';
import type { WorkflowActivities } from '../workflows/activity-contracts.js';
import type { ActivityDeps } from './activity-deps.js';
import { createBatchActivities } from './batch-activities.js';
import { createCancelActivities } from './cancel-activities.js';
import { createGenerationActivities } from './generation-activities.js';
import { createPruningActivities } from './pruning-activities.js';
import { createReconciliationActivities } from './reconciliation-activities.js';
import { createThumbnailActivities } from './thumbnail-activities.js';
import { createWebhookActivities } from './webhook-activities.js';

/**
 * Every activity the worker registers, built from its dependencies: each factory returns its
 * workflow's contract, and the whole is what the workflows proxy (WorkflowActivities).
 */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createGenerationActivities(deps),
    ...createCancelActivities(deps),
    ...createReconciliationActivities(deps),
    ...createPruningActivities(deps),
    ...createThumbnailActivities(deps),
    ...createWebhookActivities(deps),
    ...createBatchActivities(deps),
  } satisfies WorkflowActivities<ProviderResult, StoredOutput>;
}

export type Activities = ReturnType<typeof createActivities>;
