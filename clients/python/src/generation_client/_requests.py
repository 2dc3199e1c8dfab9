"""What the sync and async generations resources share: the requests they send and how they read
the answers (their steps: ``_generation_steps``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote as escape

from pydantic import BaseModel

from ._core import Request, Settings
from .errors import (
    ApiError,
    GenerationClientError,
    GenerationFailedError,
    GenerationRejectedError,
    RouteNotAvailableError,
)
from .types import Generation, GenerationRequest, GenerationStatus, KeyedGeneration

Body = GenerationRequest | Mapping[str, Any] | None
_NO_ROUTE = re.compile(r"^No route ")


def new_idempotency_key() -> str:
    """A fresh Idempotency-Key (UUID v4), made once per create call, before its first attempt."""
    return str(uuid.uuid4())


def request_body(body: Body, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body: a GenerationRequest or a mapping, with keyword fields on top."""
    if isinstance(body, BaseModel):
        merged = body.model_dump(mode="json", exclude_unset=True)
    else:
        merged = dict(body or {})
    merged.update(fields)
    return merged


def create_request(
    settings: Settings,
    body: dict[str, Any],
    idempotency_key: str,
    wait: int | None,
    cancel_after: int | str | None = None,
) -> Request:
    """POST /v1/generations; ``wait`` (1-60 s) asks the server to hold the answer until it is done;
    ``cancel_after`` (seconds, or a duration such as ``"30s"``, ``"5m"``, ``"1h30m"``; 5 s to 24 h) is
    the Cancel-After header: not handed to a provider by then, the generation is canceled and refunded."""
    hold = 0 if wait is None else max(1, min(60, round(wait)))
    headers = {"prefer": f"wait={hold}"} if hold else {}
    if cancel_after is not None:
        headers["cancel-after"] = str(cancel_after)
    return Request(
        "POST",
        "/generations",
        body=body,
        idempotency_key=idempotency_key,
        headers=headers,
        timeout=max(settings.timeout, hold + 10.0) if hold else None,
    )


def get_request(generation_id: str) -> Request:
    return Request("GET", f"/generations/{escape(generation_id, safe='')}")


def events_request(generation_id: str, after: int | None) -> Request:
    headers = {} if after is None else {"last-event-id": str(after)}
    return Request("GET", f"/generations/{escape(generation_id, safe='')}/events", headers=headers)


def cancel_request(generation_id: str) -> Request:
    return Request("POST", f"/generations/{escape(generation_id, safe='')}/cancel")


def quote_request(body: dict[str, Any]) -> Request:
    return Request("POST", "/generations/quote", body=body)


def keyed(generation: Any, idempotency_key: str) -> KeyedGeneration:
    return KeyedGeneration.keyed(Generation.model_validate(generation), idempotency_key)


def with_key(error: Exception, idempotency_key: str) -> Exception:
    """Gives an error the key of the create it came from (an error from the waiting part too)."""
    if isinstance(error, GenerationClientError) and error.idempotency_key is None:
        error.idempotency_key = idempotency_key
    return error


def finished(done: Generation, idempotency_key: str) -> KeyedGeneration:
    """run()'s end: the succeeded generation, or the error of a failed or rejected one."""
    if done.status == "failed":
        raise GenerationFailedError(done, idempotency_key)
    if done.status == "rejected":
        raise GenerationRejectedError(done, idempotency_key)
    return KeyedGeneration.keyed(done, idempotency_key)


def route_missing(error: ApiError, route: str) -> NoReturn:
    """A route this client knows and the server does not (404 "No route ...", or 405): an API older
    than the client. Raised as RouteNotAvailableError naming the route, so the caller sees why."""
    if (error.status == 404 and _NO_ROUTE.match(error.api_message)) or error.status == 405:
        raise RouteNotAvailableError(
            status=error.status,
            code="route_not_available",
            message=f"This API has no {route}: it is older than this client.",
            request_id=error.request_id,
            headers=error.headers,
            body=error.body,
        ) from error
    raise error


def filter_ignored() -> RouteNotAvailableError:
    return RouteNotAvailableError(
        status=200,
        code="route_not_available",
        message=(
            "This API ignores GET /v1/generations?idempotency_key=: it is older than this client. "
            "Re-create with the same key and body instead: that is a replay, never a second charge."
        ),
    )


@dataclass(frozen=True)
class ListFilters:
    #: One status or several (sent comma-separated).
    status: GenerationStatus | Sequence[GenerationStatus] | None = None
    model: str | None = None
    #: Page size, 1 to 100 (the API's default: 20).
    limit: int | None = None
    #: Start after this cursor (a page's next_cursor).
    cursor: str | None = None
    #: Only the generation this Idempotency-Key made.
    idempotency_key: str | None = None

    def request(self, cursor: str | None) -> Request:
        status = self.status if isinstance(self.status, str) or self.status is None else ",".join(self.status)
        query: Mapping[str, str | int | None] = {
            "limit": self.limit,
            "cursor": cursor,
            "status": status,
            "model": self.model,
            "idempotency_key": self.idempotency_key,
        }
        return Request("GET", "/generations", query=query)
