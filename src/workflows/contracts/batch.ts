/* A batch's activity contract (batch-workflow.ts proxies it). */

/** Where a batch stands after a slice. */
export interface BatchStanding {
  /** Lines not admitted yet. */
  pending: number;
  /** Lines admitted and not ended (their generations are queued). */
  queued: number;
  /** A cancel was asked (the batch is `canceling`). */
  canceling: boolean;
}

/** The batch's activities; src/activities/batch-activities.ts implements them. */
export interface BatchActivities {
  /** The batch is `in_progress` (unless a cancel came first): its created event, its start time. */
  startBatch(batchId: string): Promise<void>;
  /**
   * Ends the lines not admitted when a cancel or the deadline came, admits pending lines while
   * fewer than `linesInFlight` are queued, and waits for lines to end (heartbeating), for at most
   * the slice time; then reports.
   */
  runBatchSlice(input: {
    batchId: string;
    linesInFlight: number;
    cancelSent: boolean;
  }): Promise<BatchStanding>;
  /** Asks each running line's generation to stop, under the generation cancel rules. */
  cancelBatchGenerations(batchId: string): Promise<number>;
  /** Sets the batch's end status (canceled, expired or completed) and records its end event. */
  finishBatch(batchId: string): Promise<string>;
}
