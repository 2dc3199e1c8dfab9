"""Every error the client raises, named as the TypeScript client names them.

Each error code of the API has a class of its own (``ERROR_CLASSES``), a subclass of its status
family's class (``RateLimitError`` > ``StreamLimitError``), so a caller catches one code or a whole
family; a status with an unknown code gets its family's class. Each carries ``status``, ``code``, ``message``,
``issues`` (400), ``request_id`` and, for a create, the ``idempotency_key`` it was sent with: create
again with that key and the same body to recover the generation, never charged twice.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, cast

from .types import Generation, ValidationIssue


class GenerationClientError(Exception):
    """What every error of this client is."""

    def __init__(self, message: str, *, idempotency_key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: The Idempotency-Key of the create call this came from: re-run with it, never twice charged.
        self.idempotency_key = idempotency_key


class ApiError(GenerationClientError):
    """An error answer of the API, in the spec's envelope (``error.code``, ``error.message``)."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        message: str,
        issues: list[ValidationIssue] | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        retry_after: float | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}", idempotency_key=idempotency_key)
        self.status = status
        self.code = code
        self.api_message = message
        self.issues = issues
        #: The x-request-id header: the generation id on generation endpoints. Quote it to support.
        self.request_id = request_id
        self.headers: Mapping[str, str] = headers or {}
        #: The answer's JSON (a 409 not_cancelable holds the generation).
        self.body = body
        #: The server's Retry-After, in seconds, when it sent one.
        self.retry_after = retry_after


class BadRequestError(ApiError):
    pass


class InvalidRequestError(BadRequestError):
    """400 invalid_request: ``issues`` names each offending field."""


class AuthenticationError(ApiError):
    """401 unauthorized: a missing, malformed, unknown or revoked key."""


class InsufficientCreditsError(ApiError):
    pass


class KeySpendLimitError(InsufficientCreditsError):
    """402 key_spend_limit_exceeded: the API key's own spend limit, not the balance (see client.key.get())."""


class PermissionDeniedError(ApiError):
    pass


class PaymentRequiredError(PermissionDeniedError):
    pass


class ApiAccessDisabledError(PermissionDeniedError):
    pass


class KeyModelNotAllowedError(PermissionDeniedError):
    """403 key_model_not_allowed: the model is not in the API key's list."""


class KeyReadOnlyError(PermissionDeniedError):
    """403 key_read_only: the API key may read, stream and quote only."""


class NotFoundError(ApiError):
    """404 not_found: no such route, or no such generation in this account."""


class RouteNotAvailableError(NotFoundError):
    """A route this client knows and the server does not (an API older than the client)."""


class ConflictError(ApiError):
    pass


class IdempotencyConflictError(ConflictError):
    """The Idempotency-Key was used before with another body: a new generation needs a new key."""


class NotCancelableError(ConflictError):
    """cancel(): too late to stop it unbilled; ``generation`` is its current state."""

    @property
    def generation(self) -> Generation | None:
        raw: Any = self.body
        body = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        return Generation.model_validate(body["generation"]) if "generation" in body else None


class OpenBatchLimitError(ConflictError):
    """409 open_batch_limit_exceeded: the account has as many open batches as it may; create another
    once one has ended. Never retried."""


class BatchLinesLimitError(ConflictError):
    """409 batch_lines_limit_exceeded: the account's open batches hold as many lines as they may;
    send this batch once earlier ones have ended, or in parts. Never retried."""


class MethodNotAllowedError(ApiError):
    """405 method_not_allowed: the route exists, but not with this method."""


class NotAcceptableError(ApiError):
    """406 not_acceptable: no answer in a form the Accept header allows."""


class ServerRequestTimeoutError(ApiError):
    """408 request_timeout: the server did not receive the whole request in time and closed the
    connection. Not the client's own ``RequestTimeoutError`` (an attempt past ``timeout``). Retried."""


class LengthRequiredError(ApiError):
    """411 length_required: the request needs a Content-Length."""


class PayloadTooLargeError(ApiError):
    pass


class UnsupportedMediaTypeError(ApiError):
    pass


class RateLimitError(ApiError):
    """429, or a Retry-After longer than the client sleeps through (60 s): ``retry_after`` says when."""


class ConcurrencyLimitError(RateLimitError):
    pass


class WaitLimitError(RateLimitError):
    """429 wait_limit_exceeded: no longer answered by the API (past its caps, Prefer: wait is ignored)."""


class StreamLimitError(RateLimitError):
    """429 stream_limit_exceeded: too many event streams open for the key or the server."""


class InternalServerError(ApiError):
    """Any 5xx: the API's own, or a proxy's (502, 504)."""


class InternalError(InternalServerError):
    """500 internal_error: the API's own unexpected failure (a proxy's 5xx is an ``InternalServerError``)."""


class ServiceUnavailableError(InternalServerError):
    pass


class ConnectionError(GenerationClientError, builtins.ConnectionError):
    """No answer: connection refused or reset, DNS, a cut mid-answer. Also a built-in ConnectionError."""


class RequestTimeoutError(ConnectionError, builtins.TimeoutError):
    """One attempt took longer than the client's ``timeout``."""


class WaitTimeoutError(GenerationClientError, builtins.TimeoutError):
    """wait() reached its deadline: the generation goes on; ``wait(generation_id)`` picks it up again."""

    def __init__(
        self,
        generation_id: str,
        generation: Generation | None,
        timeout: float,
        idempotency_key: str | None = None,
    ) -> None:
        super().__init__(
            f"Generation {generation_id} is still running after {timeout:g} s; it goes on: "
            "wait for it again with its id.",
            idempotency_key=idempotency_key,
        )
        self.generation_id = generation_id
        #: The last state seen.
        self.generation = generation


class BatchWaitTimeoutError(GenerationClientError, builtins.TimeoutError):
    """A batch wait that reached its deadline: the batch goes on (wait for it again with its id)."""

    def __init__(self, batch_id: str, batch: object, timeout: float) -> None:
        super().__init__(
            f"Batch {batch_id} is still running after {round(timeout)} s; it goes on: "
            "wait for it again with its id."
        )
        self.batch_id = batch_id
        #: The last state seen.
        self.batch = batch


class GenerationEndedError(GenerationClientError):
    """run(): the generation ended failed or rejected; the record's error and refund state."""

    def __init__(self, generation: Generation, idempotency_key: str | None = None) -> None:
        code = generation.error.code if generation.error else "unknown"
        text = generation.error.message if generation.error else "no message"
        super().__init__(
            f"Generation {generation.id} {generation.status}: {code}: {text}",
            idempotency_key=idempotency_key,
        )
        self.generation_id = generation.id
        #: generation_failed, provider_rejected, insufficient_credits, canceled, ...
        self.code = code
        self.credits_refunded = generation.credits_refunded
        self.credits = generation.credits
        self.generation = generation


class GenerationFailedError(GenerationEndedError):
    """status failed: it was debited; ``credits_refunded`` tells whether the refund completed."""


class GenerationRejectedError(GenerationEndedError):
    """status rejected: it never became a job and cost nothing; fix the request (see ``code``)."""


class MissingApiKeyError(GenerationClientError):
    """No API key: neither ``api_key`` nor GENERATION_API_KEY."""


class WebhookVerificationError(GenerationClientError):
    """A webhook delivery that the secret did not sign, or not recently: answer it 4xx and ignore it."""


class DownloadError(GenerationClientError):
    """A download that did not land: the result host's answer, an expired result, an existing file."""


#: The class of each error code, named as the TypeScript client's ``errorClasses``. A code the API
#: adds fails tests/test_errors.py (which reads the OpenAPI document's list) until it has its class.
ERROR_CLASSES: Mapping[str, type[ApiError]] = {
    "invalid_request": InvalidRequestError,
    "unauthorized": AuthenticationError,
    "insufficient_credits": InsufficientCreditsError,
    "key_spend_limit_exceeded": KeySpendLimitError,
    "payment_required": PaymentRequiredError,
    "api_access_disabled": ApiAccessDisabledError,
    "key_model_not_allowed": KeyModelNotAllowedError,
    "key_read_only": KeyReadOnlyError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "not_acceptable": NotAcceptableError,
    "request_timeout": ServerRequestTimeoutError,
    "idempotency_conflict": IdempotencyConflictError,
    "open_batch_limit_exceeded": OpenBatchLimitError,
    "batch_lines_limit_exceeded": BatchLinesLimitError,
    "length_required": LengthRequiredError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "rate_limited": RateLimitError,
    "concurrency_limit_exceeded": ConcurrencyLimitError,
    "wait_limit_exceeded": WaitLimitError,
    "stream_limit_exceeded": StreamLimitError,
    "not_cancelable": NotCancelableError,
    "internal_error": InternalError,
    "service_unavailable": ServiceUnavailableError,
}


def _by_status(status: int) -> type[ApiError]:
    families: dict[int, type[ApiError]] = {
        400: BadRequestError,
        401: AuthenticationError,
        402: InsufficientCreditsError,
        403: PermissionDeniedError,
        404: NotFoundError,
        409: ConflictError,
        429: RateLimitError,
        503: ServiceUnavailableError,
    }
    if status in families:
        return families[status]
    return InternalServerError if status >= 500 else ApiError


def api_error_for(**fields: Any) -> ApiError:
    """The error for an answer: the code's own class when it has one, else the status family's."""
    cls = ERROR_CLASSES.get(str(fields["code"])) or _by_status(int(fields["status"]))
    return cls(**fields)
