// A workflow for worker-smoke.test.ts only, bundled by that test: one round trip through a worker and PostgreSQL.
import { proxyActivities, workflowInfo } from '@temporalio/workflow';

export interface HealthActivities {
  /** PostgreSQL's clock, as the worker's activity reads it. */
  databaseTime: () => Promise<string>;
}

const { databaseTime } = proxyActivities<HealthActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 3 },
});

export async function healthCheckWorkflow(): Promise<{ workflowId: string; databaseTime: string }> {
  return { workflowId: workflowInfo().workflowId, databaseTime: await databaseTime() };
}
