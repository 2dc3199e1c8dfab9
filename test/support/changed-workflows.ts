// A second build of the workflows for test/worker/worker-versions.test.ts: the same story with a
// one-millisecond timer beside it, a change no history of the first build replays (a command it lacks).
import { setWorkflowOptions, sleep } from '@temporalio/workflow';
import { generationWorkflow as firstBuild } from '../../src/workflows/generation-workflow.js';

export { generationRetentionWorkflow } from '../../src/workflows/generation-workflow.js';
export { reconciliationWorkflow } from '../../src/workflows/reconciliation-workflow.js';
export { pruningWorkflow } from '../../src/workflows/pruning-workflow.js';
// Unchanged, so that this build runs batches (and their webhook deliveries) once it is current.
export { batchWorkflow } from '../../src/workflows/batch-workflow.js';
export { webhookDeliveryWorkflow } from '../../src/workflows/webhook-delivery-workflow.js';
export { thumbnailsWorkflow } from '../../src/workflows/thumbnails-workflow.js';

export function generationWorkflow(...args: Parameters<typeof firstBuild>) {
  // The story first: its handlers are registered in the first activation, as the update needs.
  const story = firstBuild(...args);
  void sleep(1);
  return story;
}
setWorkflowOptions({ versioningBehavior: 'PINNED' }, generationWorkflow);
