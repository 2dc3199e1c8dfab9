import { ParentClosePolicy, startChild } from '@temporalio/workflow';
import type { GenerationStart } from './generation-types.js';
import { webhookDeliveryWorkflowId } from './webhook-delivery-types.js';
import type { webhookDeliveryWorkflow } from './webhook-delivery-workflow.js';

/**
 * Starts the generation's webhook delivery workflow once it is admitted, when its request named a
 * webhook: a child that outlives this run (ABANDON: it delivers for days, and through the
 * retention run). Started from here, not by the API after its answer, so that a crash anywhere
 * between admission and the first delivery loses nothing: the start is in this run's history.
 * Not waited for on the way to the provider (the start goes out with the next step's command);
 * the returned promise settles once it started, and never rejects: a run of that id started
 * already (a run replayed) is as good.
 */
export function startWebhookDeliveries(start: GenerationStart): Promise<void> {
  const { webhook, generationId } = start;
  if (!webhook) return Promise.resolve();
  return startChild<typeof webhookDeliveryWorkflow>('webhookDeliveryWorkflow', {
    workflowId: webhookDeliveryWorkflowId(generationId),
    args: [
      {
        generationId,
        retryDelaysMs: webhook.retryDelaysMs,
        subscription: { url: webhook.url, events: webhook.events },
      },
    ],
    parentClosePolicy: ParentClosePolicy.ABANDON,
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    staticSummary: `webhooks of ${generationId}`,
  }).then(
    () => undefined,
    () => undefined,
  );
}
