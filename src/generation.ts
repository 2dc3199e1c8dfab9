// The vocabulary of a generation as the v1 contract names it, shared by every room: pure data.

/** A generation's status, as clients read it (spec: "Generation object"). */
export const generationStatuses = ['queued', 'succeeded', 'failed', 'rejected'] as const;
export type GenerationStatus = (typeof generationStatuses)[number];

/** Why a generation failed or was rejected: a stable code and a message for people. */
export interface GenerationError {
  code: string;
  message: string;
}
