"""What the sync and async HTTP cores share: the request as sent, answers as errors, the retry delay."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import httpx

from .errors import ApiError, ConnectionError, RequestTimeoutError, api_error_for
from .retry_policy import MAX_RETRY_AFTER, RetryEvent, backoff, is_retryable_status, parse_retry_after
from .types import ValidationIssue

OnRetry = Callable[[RetryEvent], None]


@dataclass(frozen=True)
class Settings:
    #: Never in the repr: error trackers (Sentry) and ``pytest --showlocals`` record locals' reprs.
    api_key: str = field(repr=False)
    #: Ends with the version segment, e.g. http://127.0.0.1:8080/v1 (no trailing slash).
    base_url: str
    max_retries: int
    timeout: float
    user_agent: str
    #: Told before each retry's sleep (the client's ``on_retry``).
    on_retry: OnRetry | None = None


@dataclass
class Request:
    method: Literal["GET", "POST"]
    path: str
    query: Mapping[str, str | int | None] | None = None
    #: Serialized once, so that every attempt sends the same bytes (the key's fingerprint).
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=lambda: {})
    idempotency_key: str | None = None
    #: This request's own per-attempt limit (a held ``Prefer: wait`` needs longer than a plain read).
    timeout: float | None = None
    #: Statuses answered as they are rather than raised (304 for a conditional GET).
    pass_statuses: tuple[int, ...] = ()
    #: A body sent as it is (a JSONL file) instead of ``body``: its bytes, or the path of a file read
    #: afresh for each attempt as it is sent.
    upload: bytes | Path | None = None
    upload_type: str = "application/x-ndjson"


@dataclass(frozen=True)
class Response:
    status: int
    headers: httpx.Headers
    data: Any
    request_id: str | None


@dataclass(frozen=True)
class Prepared:
    method: str
    url: str
    params: dict[str, str]
    #: Not in the repr: they carry the API key (``authorization``).
    headers: dict[str, str] = field(repr=False)
    content: bytes | None
    timeout: float


def prepare(settings: Settings, request: Request) -> Prepared:
    content = (
        None
        if request.body is None
        else json.dumps(request.body, separators=(",", ":"), ensure_ascii=False).encode()
    )
    headers = {
        "accept": "application/json",
        "authorization": f"Bearer {settings.api_key}",
        "user-agent": settings.user_agent,
    }
    if content is not None:
        headers["content-type"] = "application/json"
    if request.upload is not None:
        headers["content-type"] = request.upload_type
    if request.idempotency_key:
        headers["idempotency-key"] = request.idempotency_key
    headers.update(request.headers)
    params = {k: str(v) for k, v in (request.query or {}).items() if v is not None}
    return Prepared(
        request.method,
        settings.base_url + request.path,
        params,
        headers,
        content,
        request.timeout or settings.timeout,
    )


def build(
    client: httpx.Client | httpx.AsyncClient,
    prepared: Prepared,
    content: bytes | Any = None,
    timeout: float | None = None,
) -> httpx.Request:
    """The request as the client sends it (its own defaults merged in: a caller's ``http_client``
    may carry headers or cookies); ``content``: the body, else the prepared one."""
    return client.build_request(
        prepared.method,
        prepared.url,
        params=prepared.params,
        headers=prepared.headers,
        content=prepared.content if content is None else content,
        timeout=prepared.timeout if timeout is None else timeout,
    )


def _parse_json(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def outcome(request: Request, answer: httpx.Response) -> Response | ApiError:
    """The response, or the ApiError its status means (the caller decides whether to retry)."""
    text = "" if answer.status_code == 304 else answer.text
    request_id = answer.headers.get("x-request-id")
    if answer.is_success or answer.status_code in request.pass_statuses:
        return Response(answer.status_code, answer.headers, _parse_json(text), request_id)
    parsed = _parse_json(text)
    envelope = cast("dict[str, Any]", parsed) if isinstance(parsed, dict) else {}
    inner = envelope.get("error")
    error = cast("dict[str, Any]", inner) if isinstance(inner, dict) else {}
    code = error.get("code")
    message = error.get("message")
    raw_issues = envelope.get("issues")
    issues = (
        [ValidationIssue.model_validate(i) for i in cast("list[Any]", raw_issues)]
        if isinstance(raw_issues, list)
        else None
    )
    return api_error_for(
        status=answer.status_code,
        code=code if isinstance(code, str) else f"http_{answer.status_code}",
        message=message if isinstance(message, str) else (text[:200] or answer.reason_phrase or "no message"),
        issues=issues,
        request_id=request_id,
        headers=dict(answer.headers),
        body=parsed,
        retry_after=parse_retry_after(answer.headers.get("retry-after")),
        idempotency_key=request.idempotency_key,
    )


def refusal(request: Request, answer: httpx.Response) -> ApiError:
    """The ApiError of an answer that is not a 2xx (a streamed one, read whole)."""
    result = outcome(request, answer)
    assert isinstance(result, ApiError), "outcome() answers a Response only for a 2xx"
    return result


def transport_error(request: Request, prepared: Prepared, error: httpx.TransportError) -> ConnectionError:
    """A request that got no answer: a timeout, or a connection refused, reset or cut mid-answer."""
    where = f"{request.method} {request.path}"
    if isinstance(error, httpx.TimeoutException):
        failure: ConnectionError = RequestTimeoutError(
            f"{where}: no answer within {prepared.timeout:g} s ({type(error).__name__})",
            idempotency_key=request.idempotency_key,
        )
    else:
        failure = ConnectionError(
            f"{where}: {type(error).__name__}: {error}", idempotency_key=request.idempotency_key
        )
    failure.__cause__ = error
    return failure


def retry_delay(error: Exception, attempt: int, max_retries: int) -> float | None:
    """Seconds to sleep before the next attempt, or None to give up (and raise)."""
    if isinstance(error, ApiError) and not is_retryable_status(error.status):
        return None
    if attempt >= max_retries:
        return None
    if isinstance(error, ApiError) and error.retry_after is not None:
        # Longer than any caller should be held: the error (a RateLimitError for a 429) says when.
        return None if error.retry_after > MAX_RETRY_AFTER else error.retry_after
    return backoff(attempt)


def retry_event(request: Request, attempt: int, delay: float, failure: Exception) -> RetryEvent:
    return RetryEvent(
        method=request.method,
        path=request.path,
        attempt=attempt + 1,
        delay=delay,
        status=failure.status if isinstance(failure, ApiError) else None,
        error=failure,
        idempotency_key=request.idempotency_key,
    )
