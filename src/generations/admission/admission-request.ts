import type { ValidationIssue } from '../../vocabulary/errors.js';

/** A request for a generation as its transport received it, from an authenticated key. */
export interface AdmissionRequest {
  /** The key's models (Principal.models) when the door knows them: a model outside them is refused first. */
  principal: { accountId: string; keyId: string; models?: readonly string[] | null };
  /** The Idempotency-Key as sent (the API's header, the console form's token); undefined: none. */
  idempotencyKey: string | string[] | undefined;
  /**
   * The Cancel-After header as sent (the API's; see cancel-after.ts): the generation's deadline for
   * reaching a provider, from its creation. undefined: none.
   */
  cancelAfter?: string | string[] | undefined;
  /** The body as sent, checked here against its model's catalog entry. */
  body: unknown;
  /**
   * Whether an invalid request is recorded as a rejected generation (the API: it is then listed,
   * and x-request-id names it), or only refused (the console re-renders its form with the issues).
   */
  recordInvalid: boolean;
  /** The batch line this request is (the batch workflow's admissions); absent for others. */
  batch?: { batchId: string; customId: string };
  /**
   * Images the transport received itself (the console's uploads, staged to files): its own issues
   * about them (each field named there is not reported again), the body the fingerprint is taken
   * of (digests in place of the files), and the accepted input with the staged files in place.
   */
  uploads?: {
    issues: ValidationIssue[];
    forFingerprint(body: Record<string, unknown>): Record<string, unknown>;
    withStagedImages(input: Record<string, unknown>): Record<string, unknown>;
  };
}
