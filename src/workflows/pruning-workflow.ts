import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';

/** What one pruning run deletes; retentions in ms, 0: kept forever. */
export interface PruningOptions {
  /** Rows each delete statement removes at most. */
  batchSize: number;
  /** Statements per table per run at most: a run's work is bounded. */
  maxBatches: number;
  requestLogRetentionMs: number;
  /** Rejected generations; never less than the key horizon (a 402 answers for its key until then). */
  rejectedRetentionMs: number;
  simProviderJobRetentionMs: number;
}

/** Rows deleted by table; `unfinished` names the tables that had more than one run may delete. */
export interface PruningReport {
  requestLog: number;
  rejectedGenerations: number;
  keyRecords: number;
  simProviderJobs: number;
  /** Idle console sessions, expired sign-in links and day-old once-only form marks. */
  consoleRecords: number;
  unfinished: string[];
}

/** The activity the run makes; src/activities/pruning-activities.ts implements it. */
export interface PruningActivities {
  pruneRecords: (options: PruningOptions) => Promise<PruningReport>;
}

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
