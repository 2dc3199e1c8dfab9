/* The reconciliation sweep's activity contract (reconciliation-workflow.ts proxies it). */

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
