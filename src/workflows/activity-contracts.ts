import type { BatchActivities } from './batch-workflow.js';
import type { CancelActivities, GenerationActivities } from './generation-activity-contract.js';
import type { PruningActivities } from './pruning-workflow.js';
import type { ReconciliationActivities } from './reconciliation-workflow.js';
import type { ThumbnailActivities } from './thumbnails-workflow.js';
import type { WebhookActivities } from './webhook-delivery-types.js';

/**
 * Every activity the workflows run, as they declare them: each contract is written once, beside
 * the workflow that proxies it (`proxyActivities<…>`), and each activity factory in src/activities
 * returns its contract, so a change on either side that the other does not follow fails
 * `npm run typecheck` (test/workflows/activity-contracts.typecheck.ts shows it). The worker
 * registers what src/activities/index.ts builds, which satisfies this whole.
 * `Result` and `Output`: see GenerationActivities.
 */
export type WorkflowActivities<Result = unknown, Output = unknown> = GenerationActivities<Result, Output> &
  CancelActivities &
  WebhookActivities &
  PruningActivities &
  ReconciliationActivities &
  ThumbnailActivities &
  BatchActivities;
