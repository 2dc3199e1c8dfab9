import type { GenerationError } from './generation.js';

/**
 * Every error code the API can answer with, and its HTTP status: the one table
 * the error handler, the OpenAPI description and docs/api/using-the-api.md are built from.
 * Codes in the spec's table keep the spec's status; the rest fill what the spec
 * leaves "not shown".
 */
export const errorCodes = {
  invalid_request: { status: 400, description: 'The request failed validation; `issues` names each field.' },
  unauthorized: { status: 401, description: 'Missing, malformed, unknown or revoked API key.' },
  insufficient_credits: { status: 402, description: 'The balance is below the full quoted price.' },
  key_spend_limit_exceeded: {
    status: 402,
    description:
      "The price is more than what is left of the API key's own spend limit in its window; nothing was charged. See GET /v1/key.",
  },
  payment_required: { status: 403, description: 'The account has no completed paid purchase.' },
  api_access_disabled: { status: 403, description: 'API access is disabled for the account.' },
  key_model_not_allowed: {
    status: 403,
    description: "The model is not in the API key's list of models; nothing was charged. See GET /v1/key.",
  },
  key_read_only: {
    status: 403,
    description: 'The API key is read-only: it may read, stream and quote, not create, cancel or change.',
  },
  not_found: { status: 404, description: 'No such route, or no such generation in this account.' },
  method_not_allowed: { status: 405, description: 'The route exists but not with this method.' },
  not_acceptable: {
    status: 406,
    description: 'The response cannot be given in a form the Accept header allows.',
  },
  request_timeout: {
    status: 408,
    description: 'The request was not received in time; the connection is closed.',
  },
  idempotency_conflict: { status: 409, description: 'The Idempotency-Key was used with a different body.' },
  open_batch_limit_exceeded: {
    status: 409,
    description:
      'The account has as many open batches (not ended) as it may; one must end (complete, expire or be canceled) before another is created. Nothing was written or charged; not worth retrying before then.',
  },
  batch_lines_limit_exceeded: {
    status: 409,
    description:
      "The account's open batches hold as many lines as they may, and this batch's would pass it: send it once earlier batches have ended, or in parts. Nothing was written or charged.",
  },
  length_required: { status: 411, description: 'The request needs a Content-Length.' },
  payload_too_large: { status: 413, description: 'The request body is larger than the service accepts.' },
  unsupported_media_type: { status: 415, description: 'The body is not application/json.' },
  rate_limited: { status: 429, description: 'A rate limit was exceeded; see Retry-After.' },
  concurrency_limit_exceeded: {
    status: 429,
    description: 'Too many generations are in progress for the account; nothing was charged.',
  },
  // Answered no more: past the caps on waiters, Prefer: wait is not honoured (a POST's generation is
  // charged by then). Kept in the list, so that the schema's codes stay as clients know them.
  wait_limit_exceeded: {
    status: 429,
    description:
      'Not answered any more: past the caps on waiting requests, Prefer: wait is not honoured and the answer comes at once.',
  },
  stream_limit_exceeded: {
    status: 429,
    description:
      'Too many event streams (GET /v1/generations/{id}/events) are open for the API key, or on the server; see Retry-After.',
  },
  not_cancelable: {
    status: 409,
    description:
      'The generation can no longer be stopped unbilled (the provider is running or has finished it, or it is already terminal); nothing changed.',
  },
  internal_error: { status: 500, description: 'Unexpected failure. Retry with the same Idempotency-Key.' },
  service_unavailable: {
    status: 503,
    description: 'A dependency is unreachable. Retry with the same Idempotency-Key and body.',
  },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof errorCodes;

/** One field-level validation problem, as listed in a 400's `issues` array. */
export interface ValidationIssue {
  /** Dotted path of the offending field, for example `images.1` or `prompt`; empty for the body itself. */
  field: string;
  /** Machine-readable reason, for example `too_big`, `invalid_enum_value`, `unrecognized_key`. */
  code: string;
  message: string;
}

/** An error that the API answers with in the spec's envelope. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: {
      issues?: ValidationIssue[];
      retryAfterSeconds?: number;
      requestId?: string;
      cause?: unknown;
      /** Answered beside `error` (a 409 not_cancelable shows the generation as it stands). */
      generation?: unknown;
    } = {},
  ) {
    super(message, { cause: extra.cause });
    this.status = errorCodes[code].status;
  }
}

export class ValidationError extends ApiError {
  constructor(
    issues: ValidationIssue[],
    message = 'The request is invalid.',
    /** The id the request was recorded under, when it was (x-request-id then names it). */
    extra: { requestId?: string } = {},
  ) {
    super('invalid_request', message, { issues, ...extra });
  }
}

/**
 * The API error a refused admission answers with: the refusal's own code and message, at that
 * code's status; a code the API does not know answers 400 (sendError gives every 400 its issues).
 */
export function admissionRefusal(error: GenerationError, requestId: string): ApiError {
  const code: ErrorCode = Object.hasOwn(errorCodes, error.code)
    ? (error.code as ErrorCode)
    : 'invalid_request';
  return new ApiError(code, error.message, { requestId });
}

/** A retry whose Idempotency-Key names a generation made from another body. */
export function idempotencyConflict(requestId: string): ApiError {
  return new ApiError(
    'idempotency_conflict',
    'This Idempotency-Key was used with a different request body. Use a new key for a new generation.',
    { requestId },
  );
}

/**
 * A failure no retry can fix: a bug, a broken catalog entry, data that breaks an invariant. An
 * activity that throws it fails for good at once (src/activities/failures.ts).
 */
export class PermanentError extends Error {
  override readonly name = 'PermanentError';
}
