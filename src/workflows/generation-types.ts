// Types shared by the API, the generation workflow and its activities. Pure data: no I/O.

import type { GenerationError } from '../vocabulary/generation.js';

/** Everything the workflow is started with. Large inputs are references (URLs), never bytes. */
import type { WebhookSubscription } from './webhook-delivery-types.js';

export interface GenerationStart {
  generationId: string;
  /** This generation's workflow: derived from the API key and Idempotency-Key, or random. */
  workflowId: string;
  accountId: string;
  apiKeyId: string;
  model: string;
  mediaType: 'image' | 'video';
  /** The accepted request fields other than model; inline images replaced by stored URLs. */
  input: Record<string, unknown>;
  /** sha256 of the canonical request body: a replay with another body is a conflict. */
  fingerprint: string;
  idempotencyKey: string | null;
  /** Storage folder holding inline input images, if any. */
  inputPrefix: string | null;
  /** ISO timestamp the API received the request. */
  createdAt: string;
  /**
   * The request's webhook subscription (POST `webhook`), absent without one: once admitted, the
   * workflow starts the generation's delivery workflow with it (generation-webhooks.ts), so no
   * crash of the API between admission and that start can lose the deliveries.
   */
  webhook?: WebhookSubscription;
  /**
   * The routes to try, in order, as admission planned them (absent from older APIs: the model's
   * one route). The workflow moves to the next only when the submit proves the last did not
   * accept the job (`RouteNotAccepted`).
   */
  routes?: PlannedRoute[];
  /**
   * The batch line this generation is (POST /v1/batches), absent for a generation created on its
   * own: the debit writes both on its row, holds it to the batch's bound rather than the account's
   * concurrency limit, and its start may carry a task priority of its own.
   */
  batch?: BatchLineRef;
  /**
   * The request's Cancel-After deadline (ISO; the `Cancel-After` header added to its creation
   * time), absent without one: a submit attempt past it sends nothing and fails CancelAfterPassed,
   * and the generation is refunded as canceled. A job handed to the provider before it runs on.
   */
  cancelAfter?: string;
  timing: {
    /** Each of the two submission attempts made while the POST waits. */
    submitTimeoutMs: number;
    pollIntervalMs: number;
    resultRetentionMs: number;
    idempotencyRetentionMs: number;
    /** How long a review waits in the active run before its review run takes it (default: defaultReviewHandOffMs). */
    reviewHandOffMs?: number;
    /** How long each step is retried before the workflow gives up on it (absent from older APIs: the defaults). */
    horizons?: Partial<StepHorizons>;
    /**
     * Past this many history events, a run waiting for its provider continues as new at its next
     * read (absent: waitHistoryEventLimit, 5,000). Tests lower it to tell that story quickly.
     */
    waitHistoryEventLimit?: number;
  };
}

/** A batch's line: the batch's id and the line's `custom_id`. */
export interface BatchLineRef {
  batchId: string;
  customId: string;
}

/** One route of a generation's plan: its position in the model's routes, and its provider. */
export interface PlannedRoute {
  route: number;
  provider: string;
}

/**
 * How long each retried step may keep failing before the workflow stops retrying it: before the
 * debit the request is refused; after it, the generation is refunded (or goes to review where the
 * provider may have run the job). Milliseconds.
 */
export interface StepHorizons {
  /** The debit (slot, quote, credits taken), retried while the POST waits (ADMISSION_HORIZON_MS). */
  admissionMs: number;
  /** Handing the job to a provider slower than the POST. */
  submitMs: number;
  /** The provider's job running to its end. */
  providerWaitMs: number;
  /** Copying the results into our storage ("persistence recovery"). */
  persistMs: number;
  /** Refunds, review marks and content expiry. */
  bookkeepingMs: number;
}

const hour = 3_600_000;
export const defaultStepHorizons: StepHorizons = {
  admissionMs: 4_000,
  submitMs: hour,
  providerWaitMs: 6 * hour,
  persistMs: 6 * hour,
  bookkeepingMs: 24 * hour,
};

/** What the debit decided about a generation. */
export type DebitDecision =
  | { outcome: 'accepted'; credits: number }
  | { outcome: 'rejected'; error: GenerationError; claimsKey: boolean };

/**
 * What the debit decided: about this run's generation, or that the Idempotency-Key's record (in
 * PostgreSQL) names an earlier generation, whose workflow has ended: this run answers for it.
 */
export type DebitOutcome = DebitDecision | { outcome: 'key_held'; holder: AdmitResult };

/** A keyed generation's claim on its Idempotency-Key (defined with the generation's vocabulary, below db and workflows). */
export type { KeyClaim } from '../vocabulary/generation.js';

/**
 * What the admit update answers: the original generation and how it was admitted. `admission` is
 * the debit's decision (the field keeps the name it has in recorded histories and runs in flight).
 */
export interface AdmitResult {
  generationId: string;
  fingerprint: string;
  admission: DebitDecision;
  /** Until when this generation holds its Idempotency-Key (ISO); a rejection that does not claim it: its creation. */
  keyHeldUntil: string;
  /**
   * The generation's creation (ISO), as its workflow was started: every request meeting the workflow
   * answers with the same `created_at`. Absent from a key holder's answer read from the database.
   */
  createdAt?: string;
}

/**
 * What a generation's retention run carries from its active run (see generation-retention.ts): the
 * start, what the admit update answers for it, and where it stands (succeeded, or in review).
 */
export interface GenerationKept {
  start: GenerationStart;
  answer: AdmitResult;
  progress: GenerationProgress;
}

/** A generation support resolved with the provider's job: its active life goes on from the wait. */
export interface GenerationResumed {
  admission: DebitDecision;
  providerJobId: string;
  /**
   * A wait that continued as new (its history grew long: see generation-provider-wait.ts): how it
   * reads the job, and since when it waits. Absent when support named the job: polled at the poll
   * interval, its horizon counted afresh.
   */
  wait?: { plan?: ProviderWaitPlan; since: number };
  /** The route the job is on and the job as staged for the first, for failover after a continue-as-new. */
  route?: { position: number; staged?: GenerationStart };
}

/**
 * How the wait for a submitted job reads it (the submit's answer): `push`: the provider will push
 * the job's end (a webhook was sent with the create, or the simulated provider), so reads on a
 * timer are a fallback: the first after `firstReadMs` (the model's expected run time and a grace),
 * the next every `everyMs`. Without push, the job is read every poll interval.
 */
export interface ProviderWaitPlan {
  push: boolean;
  firstReadMs: number;
  everyMs: number;
  /**
   * A read is a status request or two, within seconds (fal, Replicate, the simulated provider): a
   * local activity. False for a synchronous provider, whose read is its call (OpenAI).
   */
  shortReads?: boolean;
}

/** A submitted job: the provider's job reference, and how its wait reads it. */
export interface SubmittedJob {
  jobId: string;
  wait?: ProviderWaitPlan;
}

/**
 * What wakes a generation waiting for its provider (providerJobEndedSignal): its id (the workflow id
 * may have moved on to a newer generation) and the job's reference as the generation recorded it
 * (`replicate:<id>`, `fal:<model>::<id>::<ms>`, a bare simulated id). See src/providers/provider-push.ts.
 */
export interface ProviderJobEnded {
  generationId: string;
  jobId: string;
}

/** Support's decision on a generation whose provider acceptance is unresolved. */
export type Resolution =
  { action: 'refund'; note?: string } | { action: 'succeed'; providerJobId: string; note?: string };

/** What the state query reports: the workflow's own view, for operators. */
export interface GenerationProgress {
  generationId: string;
  step:
    | 'admitting'
    | 'rejected'
    | 'submitting'
    | 'generating'
    | 'persisting'
    | 'refunding'
    | 'needs_review'
    | 'succeeded'
    | 'failed'
    | 'expired'
    | 'expiry_failed'
    /** A run that met the key's record of an earlier generation and answered for it. */
    | 'key_held';
  providerJobId: string | null;
  expiresAt: string | null;
}

/** Failure types activities report, named in the workflow's retry policies (see src/activities/failures.ts). */
export const errorTypes = {
  providerRejection: 'ProviderRejection',
  providerUncertain: 'ProviderUncertain',
  /** The provider account has its cap of jobs in flight: the job waits in our queue (retried). */
  providerBusy: 'ProviderBusy',
  /** Retrying cannot help: a bug, a broken catalog entry, a result that can never be fetched. */
  permanent: 'PermanentFailure',
  /** Data PostgreSQL refuses to store: the request itself is at fault. */
  invalidInput: 'InvalidInput',
  /** PostgreSQL or another dependency is unreachable: retried. */
  dependencyUnavailable: 'DependencyUnavailable',
  /** The generation was already refunded (a support reset re-ran it): nothing more may happen to it. */
  generationSettled: 'GenerationSettled',
  /**
   * The route's provider proved it did not take the job (refused before accepting, breaker open,
   * in-flight cap full, a job it reports never started), its end recorded: the next route may be
   * tried. Only raised while a next route exists.
   */
  routeNotAccepted: 'RouteNotAccepted',
  /** A reference image the customer named cannot be used (fetched, or of ours): the request's fault. */
  referenceImageRefused: 'ReferenceImageRefused',
  /** The generation's Cancel-After deadline passed before any provider was sent the job: refunded as canceled. */
  cancelAfterPassed: 'CancelAfterPassed',
} as const;

/** The failure types no retry can fix. */
export const nonRetryableTypes = [
  errorTypes.permanent,
  errorTypes.invalidInput,
  errorTypes.generationSettled,
];

/**
 * The task queue of the provider waits, next to the generation's own: a wait
 * holds its worker slot for as long as the provider works, so waits get a slot
 * budget of their own (see createWorker).
 */
export const providerWaitQueue = (taskQueue: string): string => `${taskQueue}.provider-waits`;

/**
 * Where webhook deliveries run (their own slots: a slow receiver never holds a generation's step):
 * the webhooks queue of `taskQueue`, which is that queue itself when it is one (and the one beside
 * it for the batches queue: a batch's own deliveries go where the generations' do).
 */
export const webhookQueue = (taskQueue: string): string =>
  taskQueue.endsWith('.webhooks') ? taskQueue : `${taskQueue.replace(/\.batches$/, '')}.webhooks`;

/**
 * Where batches' workflows and their slices run: a queue of their own, with a worker slot budget
 * of its own (WORKER_MAX_BATCH_SLICES), so that however many batches are open, a slice never holds
 * a slot that a generation's submit, persist or refund needs.
 */
export const batchQueue = (taskQueue: string): string => `${taskQueue}.batches`;

/**
 * The task queue of the gallery's thumbnails: made after a generation succeeded, off its critical
 * path (the customer's result is the image, not its tile), by whichever workers poll it (see
 * WORKER_TASK_QUEUES).
 */
export const thumbnailQueue = (taskQueue: string): string => `${taskQueue}.thumbnails`;
