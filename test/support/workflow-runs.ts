import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';

type History = temporal.api.history.v1.IHistory;

/**
 * A generation's workflow id holds a chain of runs: its active run, then the retention run it
 * continued as (and, after a review, the runs after it). The runs, first to last, from the newest
 * back along continue-as-new; a support reset starts a chain of its own (its reset run is the first).
 */
export async function runsOf(
  client: Client,
  workflowId: string,
): Promise<{ runId: string; history: History }[]> {
  const runs: { runId: string; history: History }[] = [];
  let runId: string | null | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.unshift({ runId, history });
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
  }
  return runs;
}

/** The history of the generation's active run (admission to its outcome): the first of the chain. */
export async function activeRunHistory(client: Client, workflowId: string): Promise<History> {
  return (await runsOf(client, workflowId))[0]!.history;
}

/** Every event of every run of the chain, first to last (for what any of its runs may hold). */
export async function chainHistory(client: Client, workflowId: string): Promise<History> {
  return { events: (await runsOf(client, workflowId)).flatMap((run) => run.history.events ?? []) };
}

/** One activity a run ran: scheduled (a task on a queue) or local (its marker), and its summary. */
export interface RanActivity {
  name: string;
  local: boolean;
  summary: string | undefined;
}

/**
 * The activities a history ran, in order: each scheduled activity and each local activity (whose
 * history holds only a marker), with the summary each was given (the reason of a read of the job).
 */
export function activitiesOf(history: History): RanActivity[] {
  const text = (payload: { data?: Uint8Array | null } | null | undefined) =>
    payload?.data ? (JSON.parse(Buffer.from(payload.data).toString()) as unknown) : undefined;
  const ran: RanActivity[] = [];
  for (const event of history.events ?? []) {
    const summary = text(event.userMetadata?.summary) as string | undefined;
    const scheduled = event.activityTaskScheduledEventAttributes?.activityType?.name;
    if (scheduled) ran.push({ name: scheduled, local: false, summary });
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName === 'core_local_activity') {
      const data = text(marker.details?.data?.payloads?.[0]) as { activity_type?: string } | undefined;
      if (data?.activity_type) ran.push({ name: data.activity_type, local: true, summary });
    }
  }
  return ran;
}
