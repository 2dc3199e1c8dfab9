import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type {
  ReconciliationActivities,
  ReconciliationOptions,
  ReconciliationReport,
} from './contracts/reconciliation.js';

const { reconcileGenerations } = proxyActivities<ReconciliationActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '1 minute',
  retry: { maximumAttempts: 3 },
});

/**
 * Started by the `generation-reconciliation.<task queue>` schedule: finds generations whose debit would
 * otherwise be held silently (their workflow terminated or failed from outside) and finishes them
 * through the refund path, or flags them for review. The run's result says what it did.
 */
export async function reconciliationWorkflow(options: ReconciliationOptions): Promise<ReconciliationReport> {
  const report = await reconcileGenerations(options);
  setCurrentDetails(
    `examined ${report.examined}: refunded ${report.refunded.length}, flagged for review ${report.flaggedForReview.length}, running past horizon ${report.runningPastHorizon.length}, undecided ${report.undecided.length}`,
  );
  return report;
}
