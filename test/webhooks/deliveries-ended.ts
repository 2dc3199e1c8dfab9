import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { webhookDeliveryWorkflowId } from '../../src/workflows/webhook-delivery-types.js';

/**
 * Generation `id`'s delivery workflow, run to its end (delivered, or its retry schedule spent). The
 * generation workflow starts it as a child when its first event is due, so on a loaded machine it may
 * not exist yet when the API has answered 202: wait for it to appear (up to `timeoutMs`) first.
 */
export async function deliveriesEnded(client: Client, id: string, timeoutMs = 20_000): Promise<void> {
  const handle = client.workflow.getHandle(webhookDeliveryWorkflowId(id));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await handle.result();
      return;
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError) || Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
