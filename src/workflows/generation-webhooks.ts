import { getExternalWorkflowHandle, ParentClosePolicy, startChild, workflowInfo } from '@temporalio/workflow';
import { webhookQueue, type GenerationStart } from './generation-types.js';
import { webhookDeliveryWorkflowId } from './webhook-delivery-types.js';
import { webhookNudgeSignal, type webhookDeliveryWorkflow } from './webhook-delivery-workflow.js';

/**
 * Starts the generation's webhook delivery workflow once it is admitted, when its request named a
 * webhook: a child that outlives this run (ABANDON: it delivers for days, and through the
 * retention run), on the webhooks task queue (its workflow tasks never wait behind a generation's,
 * nor delay them). Started from here, not by the API after its answer, so that a crash anywhere
 * between admission and the first delivery loses nothing: the start is in this run's history.
 * Not waited for on the way to the provider (the start goes out with the next step's command);
 * the returned promise settles once it started, and never rejects: a run of that id started
 * already (a run replayed) is as good. A batch's workflow starts its own the same way
 * (`generationId` is then the batch's id: the delivery workflow serves both).
 */
export function startWebhookDeliveries(
  start: Pick<GenerationStart, 'generationId' | 'webhook'>,
): Promise<void> {
  const { webhook, generationId } = start;
  if (!webhook) return Promise.resolve();
  return startChild<typeof webhookDeliveryWorkflow>('webhookDeliveryWorkflow', {
    workflowId: webhookDeliveryWorkflowId(generationId),
    taskQueue: webhookQueue(workflowInfo().taskQueue),
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

/**
 * What tells a subscribed generation's delivery workflow to look at the event log now (its
 * webhookNudgeSignal): `nudge`, called after each step that may have logged an event
 * (generationSteps): the event is committed by then, so the look finds it. Not waited for, and
 * its failure ignored: a delivery workflow not started yet reads the log when it starts, one that
 * has ended has nothing more to deliver, and a nudge lost otherwise delays a delivery until the
 * workflow's own timer. `sent` settles once every nudge so far has: a run waits for it before it
 * ends or continues as new, which would drop a signal still on its way. Without a subscription,
 * no nudge.
 */
export function webhookNudges(start: GenerationStart): { nudge?: () => void; sent: () => Promise<void> } {
  if (!start.webhook) return { sent: () => Promise.resolve() };
  const deliveries = getExternalWorkflowHandle(webhookDeliveryWorkflowId(start.generationId));
  const pending = new Set<Promise<void>>();
  return {
    nudge: () => {
      const sending = deliveries.signal(webhookNudgeSignal).catch(() => undefined);
      pending.add(sending);
      void sending.then(() => pending.delete(sending));
    },
    sent: async () => {
      await Promise.all([...pending]);
    },
  };
}
