import type { Client } from '@temporalio/client';
import type proto from '@temporalio/proto';

/**
 * Every run of a workflow id, oldest first: a generation's active run continues as new into its
 * retention run (and a long wait for its provider into more runs), so the newest run alone is not
 * the generation. Walked back from the newest through each run's continuedExecutionRunId.
 */
export async function workflowRuns(
  client: Client,
  workflowId: string,
): Promise<proto.temporal.api.history.v1.IHistory[]> {
  const runs: proto.temporal.api.history.v1.IHistory[] = [];
  let runId: string | null | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.unshift(history);
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
  }
  return runs;
}
