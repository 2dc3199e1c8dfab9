import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { HealthActivities } from '../activities/health-activities.js';

const { databaseTime } = proxyActivities<HealthActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 3 },
});

/** A round trip through a worker and PostgreSQL: what `npm run admin -- doctor` and the smoke test run. */
export async function healthCheckWorkflow(): Promise<{ workflowId: string; databaseTime: string }> {
  return { workflowId: workflowInfo().workflowId, databaseTime: await databaseTime() };
}
