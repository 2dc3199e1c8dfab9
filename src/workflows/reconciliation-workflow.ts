import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';

export interface ReconciliationOptions {
  /** A queued generation untouched this long is looked at. */
  graceMs: number;
  /** Queued this long after creation (every step's horizon), a generation whose workflow runs is reported. */
  overdueMs: number;
  /** Most generations looked at per run. */
  limit: number;
}

/** What one sweep did, by generation id: shown as the run's result in the Temporal UI. */
export interface ReconciliationReport {
  examined: number;
  refunded: string[];
  flaggedForReview: string[];
  runningPastHorizon: string[];
  /** Temporal did not say whether their workflow runs; looked at again next time. */
  undecided: string[];
}

/** The activity the sweep runs; src/activities/reconciliation-activities.ts implements it. */
export interface ReconciliationActivities {
  reconcileGenerations: (options: ReconciliationOptions) => Promise<ReconciliationReport>;
}

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
