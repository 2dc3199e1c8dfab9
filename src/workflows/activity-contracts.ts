import type { BatchActivities } from './contracts/batch.js';
import type { CancelActivities, GenerationActivities } from './contracts/generation.js';
import type { PruningActivities } from './contracts/pruning.js';
import type { ReconciliationActivities } from './contracts/reconciliation.js';
import type { ThumbnailActivities } from './contracts/thumbnails.js';
import type { WebhookActivities } from './contracts/webhook-delivery.js';

/**
 * Every activity the workflows run, as they declare them: each contract is written once, in
 * src/workflows/contracts/ (one file per workflow that proxies it with `proxyActivities<…>`: the
 * generation and its cancel, webhook delivery, batch, and the pruning, reconciliation and
 * thumbnails sweeps), and each activity factory in src/activities returns its contract, so a change
 * on either side that the other does not follow fails `npm run typecheck`
 * (test/workflows/activity-contracts.typecheck.ts shows it). The worker registers what
 * src/activities/index.ts builds, which satisfies this whole.
 * `Result` and `Output`: see GenerationActivities.
 */
export type WorkflowActivities<Result = unknown, Output = unknown> = GenerationActivities<Result, Output> &
  CancelActivities &
  WebhookActivities &
  PruningActivities &
  ReconciliationActivities &
  ThumbnailActivities &
  BatchActivities;
