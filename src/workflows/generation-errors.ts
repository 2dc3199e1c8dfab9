import type { GenerationError } from '../vocabulary/generation.js';

/**
 * The errors a generation record can end with after its debit, as the client reads them
 * (`error.code`, `error.message`). Documented in docs/api/using-the-api.md (Errors).
 */
export const generationErrors = {
  providerRejected: {
    code: 'provider_rejected',
    message: 'The provider rejected this request. The credits were refunded.',
  },
  submissionUnresolved: {
    code: 'submission_unresolved',
    message:
      'The provider may have accepted this generation, but its answer was lost and it cannot tell us. Nothing was refunded yet. Contact support with this id before starting another generation.',
  },
  refundedBySupport: {
    code: 'generation_failed',
    message: 'Support found this generation was not produced. The credits were refunded.',
  },
  /**
   * A reference image the customer named could not be fetched or used (no such host, a 4xx, not an
   * image, over the limits, a host that kept failing): the request's fault, found before the provider
   * was asked. The code is the one a provider's refusal of the input has.
   */
  referenceImageUnusable: (reason: string): GenerationError => ({
    code: 'provider_rejected',
    message: `${reason.charAt(0).toUpperCase()}${reason.slice(1)}. Nothing was sent to the provider; the credits were refunded.`,
  }),
  /** The client (or support, or an operator) canceled it before the provider ran it. */
  canceled: {
    code: 'canceled',
    message: 'This generation was canceled before the provider ran it. The credits were refunded.',
  },
  /** Its Cancel-After deadline passed before it was handed to a provider: as a cancel before the run. */
  canceledByDeadline: {
    code: 'canceled',
    message:
      'This generation was canceled: its Cancel-After deadline passed before it was handed to a provider. The credits were refunded.',
  },
  /**
   * A cancel reached the provider just after it had started the job, which it then stopped: the
   * provider bills what ran, so the debit stands (the cancel's rule: free only before the run).
   */
  canceledWhileRunning: {
    code: 'canceled',
    message:
      'This generation was canceled, but the provider had already started it and bills the run, so the credits were not refunded.',
  },
  /** A step failed in a way no retry can fix (a broken model entry, a result that cannot be used). */
  cannotComplete: (what: string): GenerationError => ({
    code: 'generation_failed',
    message: `${what} The credits were refunded.`,
  }),
  /** A step kept failing until its horizon. */
  timedOut: (what: string): GenerationError => ({
    code: 'generation_timed_out',
    message: `${what} The credits were refunded.`,
  }),
  /** The provider ran the job and reports that it failed, in its own words. */
  providerFailed: (message: string): GenerationError => ({ code: 'generation_failed', message }),
  /** Reconciliation found the generation's workflow gone before the provider had it. */
  interrupted: {
    code: 'generation_interrupted',
    message:
      'Processing of this generation stopped before it reached the provider. The credits were refunded.',
  },
  /** Reconciliation found the generation's workflow gone after the provider may have had it. */
  interruptedNeedsReview: {
    code: 'submission_unresolved',
    message:
      'Processing of this generation stopped after it was sent to the provider, which may have run it. Nothing was refunded yet. Contact support with this id before starting another generation.',
  },
} as const satisfies Record<string, GenerationError | ((what: string) => GenerationError)>;

/** What went wrong at a step that gave up after the debit: the `what` of cannotComplete and timedOut. */
export const whatFailed = {
  submit: 'This generation could not be submitted to the provider.',
  staging: 'The reference images could not be fetched and stored.',
  acceptance: 'The provider did not accept this generation in time.',
  providerWait: 'The provider did not finish this generation in time.',
  persist: 'The result could not be copied from the provider.',
} as const;

/** What a debit that could not complete answers the POST with (no key is claimed, nothing is charged). */
export const debitErrors = {
  invalidInput: {
    code: 'invalid_request',
    message: 'The request holds data the service cannot store.',
  },
  unavailable: {
    code: 'service_unavailable',
    message:
      'Admission did not complete: a dependency is unavailable. Retry with the same Idempotency-Key and body.',
  },
  internal: {
    code: 'internal_error',
    message:
      'Admission failed unexpectedly. Retry with the same Idempotency-Key, or quote the x-request-id to support.',
  },
} as const satisfies Record<string, GenerationError>;

/** Why the debit refused a request: the POST's answer and the rejected record's error. Nothing is charged. */
export const debitRefusals = {
  concurrencyLimit: (limit: number): GenerationError => ({
    code: 'concurrency_limit_exceeded',
    message: `At most ${limit} generations may be in progress at once; wait for one to finish. Nothing was charged.`,
  }),
  unavailable: (model: string): GenerationError => ({
    code: 'invalid_request',
    message: `Model ${model} is not available.`,
  }),
  insufficientCredits: (price: number, available: number): GenerationError => ({
    code: 'insufficient_credits',
    message: `This generation costs ${price} credits; the balance is ${available}.`,
  }),
  modelNotAllowed: (model: string, models: readonly string[]): GenerationError => ({
    code: 'key_model_not_allowed',
    message: keyModelNotAllowedMessage(model, models),
  }),
  /**
   * A batch's line whose batch ended first (canceled, or its completion window passed): nothing is
   * written or charged, and the batch's workflow ends the line `state` (docs/api: its results line).
   */
  batchEnded: (state: 'canceled' | 'expired'): GenerationError =>
    state === 'canceled'
      ? {
          code: 'batch_canceled',
          message: 'The batch was canceled before this line started; nothing was charged.',
        }
      : {
          code: 'batch_expired',
          message: 'The completion window passed before this line started; nothing was charged.',
        },
  keySpendLimit: (price: number, limit: KeyLimitFigures): GenerationError => ({
    code: 'key_spend_limit_exceeded',
    message: `This generation costs ${price} credits; this key's limit is ${limit.spendLimit} credits ${windowWords[limit.limitReset]} and ${limit.remaining} ${limit.remaining === 1 ? 'is' : 'are'} left${limit.resetsAt ? ` until it resets at ${limit.resetsAt}` : ' (it does not reset)'}. Nothing was charged.`,
  }),
} as const;

/** A key's spend limit as a refusal names it. */
export interface KeyLimitFigures {
  spendLimit: number;
  limitReset: 'daily' | 'weekly' | 'monthly' | 'none';
  remaining: number;
  /** ISO; null for a lifetime limit. */
  resetsAt: string | null;
}

const windowWords = {
  daily: 'a day (UTC)',
  weekly: 'a week (Monday to Sunday, UTC)',
  monthly: 'a calendar month (UTC)',
  none: 'in all',
} as const;

export function keyModelNotAllowedMessage(model: string, models: readonly string[]): string {
  return `This API key may not use model ${model}; it may use ${models.length === 0 ? 'no model' : models.join(', ')}. Nothing was charged.`;
}
