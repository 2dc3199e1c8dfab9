/* The pruning sweep's activity contract (pruning-workflow.ts proxies it). */

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
