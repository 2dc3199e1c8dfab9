/* The thumbnails sweep's activity contract (thumbnails-workflow.ts proxies it). */

/** What one sweep makes at most: `batchSize` images a batch, `maxBatches` batches. */
export interface ThumbnailSweepOptions {
  batchSize: number;
  maxBatches: number;
}

/** Thumbnails made; `more`: pending images were left for the next sweep (the budget ran out). */
export interface ThumbnailSweepReport {
  made: number;
  more: boolean;
}

/** The activity a sweep runs; src/activities/thumbnail-activities.ts implements it. */
export interface ThumbnailActivities {
  makePendingThumbnails: (options: ThumbnailSweepOptions) => Promise<ThumbnailSweepReport>;
}
