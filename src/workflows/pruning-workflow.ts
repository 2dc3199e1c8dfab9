import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { PruningActivities, PruningOptions, PruningReport } from './contracts/pruning.js';

const { pruneRecords } = proxyActivities<PruningActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '2 minutes',
  retry: { maximumAttempts: 3 },
});

/**
 * Started by the `generation-pruning.<task queue>` schedule: deletes, in bounded batches, what
 * would otherwise grow without end (key records past their horizon; the request log, rejected
 * generations and the simulated provider's jobs past their retention). The result says what it did.
 */
export async function pruningWorkflow(options: PruningOptions): Promise<PruningReport> {
  const report = await pruneRecords(options);
  setCurrentDetails(
    `deleted: request log ${report.requestLog}, rejected generations ${report.rejectedGenerations}, key records ${report.keyRecords}, simulated jobs ${report.simProviderJobs}, console sessions and links ${report.consoleRecords}` +
      (report.unfinished.length ? `; more left in ${report.unfinished.join(', ')}` : ''),
  );
  return report;
}
