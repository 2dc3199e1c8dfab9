// Types shared by the API, the generation workflow and its activities. Pure data: no I/O.

export type GenerationStatus = 'queued' | 'succeeded' | 'failed' | 'rejected';

export interface GenerationError {
  code: string;
  message: string;
}

/** Everything the workflow is started with. Large inputs are references (URLs), never bytes. */
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
  timing: {
    /** Each of the two submission attempts made while the POST waits. */
    submitTimeoutMs: number;
    pollIntervalMs: number;
    resultRetentionMs: number;
    idempotencyRetentionMs: number;
  };
}

/** What admission decided. */
export type Admission =
  | { outcome: 'accepted'; credits: number }
  | { outcome: 'rejected'; error: GenerationError; claimsKey: boolean };

/** What the admit update answers: the original generation and how it was admitted. */
export interface AdmitResult {
  generationId: string;
  fingerprint: string;
  admission: Admission;
  /** Until when this generation holds its Idempotency-Key (ISO); a rejection that does not claim it: its creation. */
  keyHeldUntil: string;
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
    | 'expired';
  providerJobId: string | null;
  expiresAt: string | null;
}

/** Error types activities throw that the workflow handles rather than retries. */
export const errorTypes = {
  providerRejection: 'ProviderRejection',
  providerUncertain: 'ProviderUncertain',
} as const;

/**
 * The task queue of the provider waits, next to the generation's own: a wait
 * holds its worker slot for as long as the provider works, so waits get a slot
 * budget of their own (see createWorker).
 */
export const providerWaitQueue = (taskQueue: string): string => `${taskQueue}.provider-waits`;
