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
