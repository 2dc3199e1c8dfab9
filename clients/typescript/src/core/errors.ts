/**
 * Every error the client throws. Each error code of the API has a class of its own
 * (`errorClasses`), a subclass of its status family's class (`RateLimitError` › `StreamLimitError`),
 * so a caller catches one code or a whole family; a status with an unknown code gets its family's
 * class. Each carries `status`, `code`, `message`, `issues` (400), `requestId` and, for a create,
 * the `idempotencyKey` it was sent with, so that a caller can always recover the generation.
 */
import type { components } from '../generated/openapi.js';

/** Every error code of the API (the OpenAPI document's list). */
export type ApiErrorCode = components['schemas']['Error']['error']['code'];

/** One offending field of a 400 invalid_request. */
export interface ValidationIssue {
  field: string;
  code: string;
  message: string;
}

/** A generation's own error object (failed or rejected records). */
export interface GenerationErrorObject {
  code: string;
  message: string;
}

/** What every error of this client has. */
export class GenerationClientError extends Error {
  /** The Idempotency-Key of the create call this error came from: re-run with it, never twice charged. */
  idempotencyKey: string | undefined;
  constructor(message: string, options?: { cause?: unknown; idempotencyKey?: string | undefined }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.idempotencyKey = options?.idempotencyKey;
  }
}

export interface ApiErrorInit {
  status: number;
  code: string;
  message: string;
  issues?: ValidationIssue[] | undefined;
  requestId?: string | undefined;
  headers?: Headers | undefined;
  /** The body of the answer (a 409 not_cancelable holds the generation). */
  body?: unknown;
  retryAfterMs?: number | undefined;
  idempotencyKey?: string | undefined;
}

/** An error answer of the API, in the spec's envelope (`error.code`, `error.message`). */
export class ApiError extends GenerationClientError {
  readonly status: number;
  readonly code: string;
  readonly issues: ValidationIssue[] | undefined;
  /** The x-request-id header: the generation id on generation endpoints. Quote it to support. */
  readonly requestId: string | undefined;
  readonly headers: Headers | undefined;
  readonly body: unknown;
  /** The server's Retry-After, in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined;
  constructor(init: ApiErrorInit) {
    super(`${init.status} ${init.code}: ${init.message}`, { idempotencyKey: init.idempotencyKey });
    this.status = init.status;
    this.code = init.code;
    this.issues = init.issues;
    this.requestId = init.requestId;
    this.headers = init.headers;
    this.body = init.body;
    this.retryAfterMs = init.retryAfterMs;
  }
}

export class BadRequestError extends ApiError {}
/** 400 invalid_request: `issues` names each offending field. */
export class InvalidRequestError extends BadRequestError {}
export class AuthenticationError extends ApiError {}
export class InsufficientCreditsError extends ApiError {}
/** 402 key_spend_limit_exceeded: the API key's own spend limit, not the balance (see `client.key.get()`). */
export class KeySpendLimitError extends InsufficientCreditsError {}
export class PermissionDeniedError extends ApiError {}
export class PaymentRequiredError extends PermissionDeniedError {}
export class ApiAccessDisabledError extends PermissionDeniedError {}
/** 403 key_model_not_allowed: the model is not in the API key's list. */
export class KeyModelNotAllowedError extends PermissionDeniedError {}
/** 403 key_read_only: the API key may read, stream and quote only. */
export class KeyReadOnlyError extends PermissionDeniedError {}
/** 404 not_found: no such route, or no such generation in this account. */
export class NotFoundError extends ApiError {}
/**
 * A route the server does not have (404 on a path that is not a generation, 405): an API older
 * than this client. The message names the route.
 */
export class RouteNotAvailableError extends NotFoundError {}
export class ConflictError extends ApiError {}
/** The Idempotency-Key was used before with a different body: a new generation needs a new key. Never retried. */
export class IdempotencyConflictError extends ConflictError {}
/** cancel(): the generation can no longer be stopped unbilled; `generation` is its current state. */
export class NotCancelableError extends ConflictError {
  get generation(): unknown {
    return this.body;
  }
}
/**
 * 409 open_batch_limit_exceeded: the account has as many open batches as it may; create another
 * once one has ended. Never retried.
 */
export class OpenBatchLimitError extends ConflictError {}
/**
 * 409 batch_lines_limit_exceeded: the account's open batches hold as many lines as they may; send
 * this batch once earlier ones have ended, or in parts. Never retried.
 */
export class BatchLinesLimitError extends ConflictError {}
/** 405 method_not_allowed: the route exists, but not with this method. */
export class MethodNotAllowedError extends ApiError {}
/** 406 not_acceptable: no answer in a form the Accept header allows. */
export class NotAcceptableError extends ApiError {}
/**
 * 408 request_timeout: the server did not receive the whole request in time and closed the
 * connection. Not the client's own `RequestTimeoutError` (an attempt past `timeoutMs`). Retried.
 */
export class ServerRequestTimeoutError extends ApiError {}
/** 411 length_required: the request needs a Content-Length. */
export class LengthRequiredError extends ApiError {}
export class PayloadTooLargeError extends ApiError {}
export class UnsupportedMediaTypeError extends ApiError {}
/** 429, or a Retry-After longer than the client waits (60 s): `retryAfterMs` says when to come back. */
export class RateLimitError extends ApiError {}
export class ConcurrencyLimitError extends RateLimitError {}
/** 429 wait_limit_exceeded: no longer answered by the API (past its caps, Prefer: wait is ignored). */
export class WaitLimitError extends RateLimitError {}
/** 429 stream_limit_exceeded: too many event streams open for the key or the server; see `retryAfterMs`. */
export class StreamLimitError extends RateLimitError {}
/** Any 5xx: the API's own, or a proxy's (502, 504). */
export class InternalServerError extends ApiError {}
/** 500 internal_error: the API's own unexpected failure (a proxy's 5xx is an `InternalServerError`). */
export class InternalError extends InternalServerError {}
export class ServiceUnavailableError extends InternalServerError {}

/** The request never got an answer: connection refused or reset, DNS, "fetch failed". */
export class ConnectionError extends GenerationClientError {}
/** One attempt took longer than `timeoutMs`. */
export class RequestTimeoutError extends ConnectionError {}

/** The caller's AbortSignal fired. `generationId` names the generation when one was known. */
export class AbortedError extends GenerationClientError {
  readonly generationId: string | undefined;
  constructor(message: string, options: { generationId?: string; idempotencyKey?: string; cause?: unknown }) {
    super(message, options);
    this.generationId = options.generationId;
  }
}

/** wait() reached its deadline: the generation goes on; `wait(generationId)` picks it up again. */
export class WaitTimeoutError extends GenerationClientError {
  readonly generationId: string;
  /** The last state seen. */
  readonly generation: unknown;
  constructor(generationId: string, generation: unknown, timeoutMs: number, idempotencyKey?: string) {
    super(
      `Generation ${generationId} is still running after ${Math.round(timeoutMs / 1000)} s; it goes on: wait for it again with its id.`,
      { idempotencyKey },
    );
    this.generationId = generationId;
    this.generation = generation;
  }
}

/** A generation that ended failed or rejected: run() throws it with the record's error and refund state. */
export class GenerationEndedError extends GenerationClientError {
  readonly generationId: string;
  /** The generation's error.code (generation_failed, provider_rejected, insufficient_credits, canceled, …). */
  readonly code: string;
  readonly creditsRefunded: boolean;
  readonly credits: number;
  readonly generation: unknown;
  constructor(
    generation: {
      id: string;
      status: string;
      credits: number;
      credits_refunded: boolean;
      error: GenerationErrorObject | null;
    },
    idempotencyKey?: string,
  ) {
    const code = generation.error?.code ?? 'unknown';
    super(
      `Generation ${generation.id} ${generation.status}: ${code}: ${generation.error?.message ?? 'no message'}`,
      { idempotencyKey },
    );
    this.generationId = generation.id;
    this.code = code;
    this.creditsRefunded = generation.credits_refunded;
    this.credits = generation.credits;
    this.generation = generation;
  }
}
/** status failed: it was debited; `creditsRefunded` tells whether the refund completed. */
export class GenerationFailedError extends GenerationEndedError {}
/** status rejected: it never became a job and cost nothing; fix the request (see `code`). */
export class GenerationRejectedError extends GenerationEndedError {}

/** The client was constructed in a browser without `dangerouslyAllowBrowser`. */
export class BrowserNotSupportedError extends GenerationClientError {}
/** No API key: neither `apiKey` nor GENERATION_API_KEY. */
export class MissingApiKeyError extends GenerationClientError {}

/**
 * The class of each error code. Typed by the OpenAPI document's list, so a code the API adds fails
 * the typecheck until it has its class here (and test/client/error-classes.test.ts checks it too).
 */
export const errorClasses: { readonly [Code in ApiErrorCode]: typeof ApiError } = {
  invalid_request: InvalidRequestError,
  unauthorized: AuthenticationError,
  insufficient_credits: InsufficientCreditsError,
  key_spend_limit_exceeded: KeySpendLimitError,
  payment_required: PaymentRequiredError,
  api_access_disabled: ApiAccessDisabledError,
  key_model_not_allowed: KeyModelNotAllowedError,
  key_read_only: KeyReadOnlyError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  not_acceptable: NotAcceptableError,
  request_timeout: ServerRequestTimeoutError,
  idempotency_conflict: IdempotencyConflictError,
  open_batch_limit_exceeded: OpenBatchLimitError,
  batch_lines_limit_exceeded: BatchLinesLimitError,
  length_required: LengthRequiredError,
  payload_too_large: PayloadTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  rate_limited: RateLimitError,
  concurrency_limit_exceeded: ConcurrencyLimitError,
  wait_limit_exceeded: WaitLimitError,
  stream_limit_exceeded: StreamLimitError,
  not_cancelable: NotCancelableError,
  internal_error: InternalError,
  service_unavailable: ServiceUnavailableError,
};

function byStatus(status: number): typeof ApiError {
  if (status === 400) return BadRequestError;
  if (status === 401) return AuthenticationError;
  if (status === 402) return InsufficientCreditsError;
  if (status === 403) return PermissionDeniedError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 429) return RateLimitError;
  if (status === 503) return ServiceUnavailableError;
  if (status >= 500) return InternalServerError;
  return ApiError;
}

/** The error class for an answer: the code's own class when it has one, else the status family's. */
export function apiErrorFor(init: ApiErrorInit): ApiError {
  const Class = Object.hasOwn(errorClasses, init.code)
    ? errorClasses[init.code as ApiErrorCode]
    : byStatus(init.status);
  return new Class(init);
}

/** A batch wait that reached its deadline: the batch goes on (wait for it again with its id). */
export class BatchWaitTimeoutError extends GenerationClientError {
  readonly batchId: string;
  /** The last state seen. */
  readonly batch: unknown;
  constructor(batchId: string, batch: unknown, timeoutMs: number) {
    super(
      `Batch ${batchId} is still running after ${Math.round(timeoutMs / 1000)} s; it goes on: wait for it again with its id.`,
    );
    this.batchId = batchId;
    this.batch = batch;
  }
}
