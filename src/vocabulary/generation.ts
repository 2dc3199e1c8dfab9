// The vocabulary of a generation as the v1 contract names it, shared by every room: pure data.

/** A generation's status, as clients read it (spec: "Generation object"). */
export const generationStatuses = ['queued', 'succeeded', 'failed', 'rejected'] as const;
export type GenerationStatus = (typeof generationStatuses)[number];

/** Why a generation failed or was rejected: a stable code and a message for people. */
export interface GenerationError {
  code: string;
  message: string;
}

/**
 * A keyed generation's claim on its Idempotency-Key, recorded in PostgreSQL with its admission so
 * that the key outlives the workflow: held until `heldUntil` (ISO), judged at `at` (the workflow's
 * clock). Made by the workflow, written by admission's repository: defined here, below both.
 */
export interface KeyClaim {
  heldUntil: string;
  at: string;
}

/**
 * How a provider's job ended, as its adapter reports it (Provider.status, once not running), the
 * wait activity returns it and the generation workflow reads it: defined here, below the three.
 * `Result`: one result as the adapter hands it over (ProviderResult); the workflow carries it to
 * persisting without reading it.
 */
export type ProviderJobEnd<Result> =
  | { state: 'succeeded'; results: Result[] }
  /**
   * `rejected`: the provider refused the input (nothing ran), as opposed to a job that failed.
   * `canceledWhileRunning`: a cancel stopped it after it had started running, and the provider
   * bills what ran (Replicate: `canceled` with `started_at`).
   */
  | {
      state: 'failed';
      message: string;
      rejected?: boolean;
      canceledWhileRunning?: boolean;
      /**
       * The provider reports the job ended without ever starting (Replicate `aborted`): nothing ran
       * or bills, and a routed generation may move on to its next route.
       */
      neverStarted?: boolean;
    };
