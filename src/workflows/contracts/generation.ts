import type { GenerationError, ProviderJobEnd } from '../../vocabulary/generation.js';
import type { DebitOutcome, GenerationStart, KeyClaim, SubmittedJob } from '../generation-types.js';

/**
 * The activities the generation workflow runs, as it needs them; src/activities/generation-activities.ts
 * implements them. Each is idempotent on the generation id. The workflow carries the provider's
 * results from the wait to persisting without reading them, so their shape (`Result`) and that of a
 * stored output (`Output`) are the implementation's.
 */
export interface GenerationActivities<Result = unknown, Output = unknown> {
  /**
   * Concurrency slot, price quote and debit in one transaction; with a key claim, the key's record
   * too (or the earlier generation whose record holds the key). Runs that predate key records claim none.
   */
  debit: (start: GenerationStart, key?: KeyClaim) => Promise<DebitOutcome>;
  /**
   * The request's input with each reference image URL of the customer's own replaced by our stored
   * copy: fetched once under the outbound rules and the reference image limits, stored under the
   * generation's input folder (deleted with its inputs). A copy stored before is not fetched again.
   * An image that cannot be used fails it as `ReferenceImageRefused`.
   */
  stageImages: (start: GenerationStart) => Promise<{ input: Record<string, unknown> }>;
  /**
   * Hands the job to the provider of the plan's route `position` (default 0), once: a later attempt
   * asks the provider instead of sending it again. Fails as `RouteNotAccepted`, once the route's end
   * is recorded, when the provider proved it did not take the job and a next route exists. Answers
   * with how the job's wait reads it (whether its provider will push its end).
   */
  submit: (start: GenerationStart, position?: number) => Promise<SubmittedJob>;
  /**
   * The job of plan position `position` ended without ever starting (the provider says so): that
   * route's end recorded and the submit claim moved to the next position, the job id cleared, in
   * one statement. True once moved (again: idempotent); false when the generation no longer waits
   * on that job (ended, in review, refunded).
   */
  leaveRoute: (
    generationId: string,
    ended: { position: number; jobId: string; reason: string },
  ) => Promise<{ moved: boolean }>;
  /** Where submission stands when its horizon passes: a recorded job, or whether the provider may have one. */
  submissionState: (
    generationId: string,
  ) => Promise<{ jobId: string | null; mayHaveReachedProvider: boolean }>;
  /**
   * Reads the job at the provider once (for a synchronous provider, makes its one call): running,
   * or its end (the job's in-flight place is then freed). `reason`: a push woke the run, a fallback
   * read while a push is expected (the request budget may answer it running unread), or a poll.
   * Fails as `ProviderUncertain` when the job's fate cannot be known: a call whose answer was lost.
   */
  readProviderJob: (
    generation: { model: string; jobId: string; generationId?: string },
    reason: 'pushed' | 'fallback' | 'poll',
  ) => Promise<{ state: 'running' } | ProviderJobEnd<Result>>;
  /** Asks the provider to stop a job we gave up on (best effort: a finished job is fine). */
  cancelJob: (jobId: string, generationId?: string) => Promise<void>;
  /** Copies each result into our storage and marks the generation succeeded. */
  persistResults: (
    generation: { generationId: string; model: string; jobId: string; results: Result[] },
    retentionMs: number,
  ) => Promise<{ expiresAt: string; outputs: Output[] }>;
  /** Returns the debit and marks the generation failed. */
  refund: (generationId: string, error: GenerationError) => Promise<void>;
  /**
   * Marks the generation failed with the debit kept (nothing refunded): a client's cancel stopped a
   * job the provider had started running, and the provider bills what ran.
   */
  endCharged: (generationId: string, error: GenerationError) => Promise<void>;
  markNeedsReview: (generationId: string, error: GenerationError) => Promise<void>;
  /** Support resolved an uncertain submission with the provider's job id. */
  recordProviderJob: (generationId: string, jobId: string) => Promise<void>;
  /** Deletes stored files and nulls input and output. */
  expireContent: (generationId: string) => Promise<void>;
  /**
   * Deletes the files of a generation that ended without success (failed and refunded, rejected)
   * and nulls its input and output; never touches one that succeeded or is in review.
   */
  discardContent: (generationId: string) => Promise<void>;
}

/** The activity behind a client's cancel (src/activities/cancel-activities.ts implements it). */
export interface CancelActivities {
  /**
   * A client's cancel: stops the job only if the provider confirms it never ran (see
   * Provider.stopBeforeRun); `unknown` when a cancel was sent but its answer does not prove the job
   * never ran, or a retry cannot tell whether the lost first ask stopped it.
   */
  stopJobBeforeRun: (jobId: string, generationId: string) => Promise<{ stopped: boolean | 'unknown' }>;
}
