// Every workflow the worker runs. This file is the bundle's entry point: keep it free of I/O.
export { generationWorkflow, generationRetentionWorkflow } from './generation-workflow.js';
export { reconciliationWorkflow } from './reconciliation-workflow.js';
export { pruningWorkflow } from './pruning-workflow.js';
export { thumbnailsWorkflow } from './thumbnails-workflow.js';
export { webhookDeliveryWorkflow } from './webhook-delivery-workflow.js';
export { batchWorkflow } from './batch-workflow.js';
