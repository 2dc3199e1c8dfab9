import type { Client } from '@temporalio/client';
import { webhookDeliveryWorkflowId } from '../../src/workflows/webhook-delivery-types.js';
import { chainHistory } from '../support/workflow-runs.js';

/**
 * The activities a generation's webhook delivery workflow scheduled, by name, in order, over all
 * its runs: what crossed Temporal between an event and its receiver.
 */
export async function deliveryActivities(client: Client, generationId: string): Promise<string[]> {
  const history = await chainHistory(client, webhookDeliveryWorkflowId(generationId));
  return (history.events ?? []).flatMap((event) => {
    const name = event.activityTaskScheduledEventAttributes?.activityType?.name;
    return name ? [name] : [];
  });
}
