"""What the sync and async generations resources share: the requests they send, how they read the
answers, and each method as steps (``_steps``). Every decision is here once; the resources only
hand the steps to their driver."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote as escape

from pydantic import BaseModel

from . import _waiting
from ._core import Request, Response, Settings
from ._steps import Call, Steps, fetch
from ._wait_state import OnUpdate
from .errors import (
    ApiError,
    GenerationClientError,
    GenerationFailedError,
    GenerationRejectedError,
    RouteNotAvailableError,
)
from .types import (
    Generation,
    GenerationEvent,
    GenerationEventList,
    GenerationList,
    GenerationRequest,
    GenerationStatus,
    KeyedGeneration,
    Quote,
)

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


def create(
    settings: Settings,
    body: Body,
    fields: Mapping[str, Any],
    idempotency_key: str | None,
    wait: int | None = None,
    cancel_after: int | str | None = None,
) -> Steps[KeyedGeneration]:
    """The key is made once, before the first attempt, and every retry sends it with the same bytes."""
    key = idempotency_key or new_idempotency_key()
    request = create_request(settings, request_body(body, fields), key, wait, cancel_after)
    return (yield from fetch(request, lambda data: keyed(data, key)))


def get(generation_id: str) -> Steps[Generation]:
    return (yield from fetch(get_request(generation_id), Generation.model_validate))


def event_log(generation_id: str, after: int | None) -> Steps[list[GenerationEvent]]:
    return (yield from fetch(events_request(generation_id, after), GenerationEventList.model_validate)).data


def run(
    settings: Settings,
    body: Body,
    fields: Mapping[str, Any],
    idempotency_key: str | None,
    timeout: float | None,
    on_update: OnUpdate | None,
    poll_interval: float,
    use_events: bool | None,
    cancel_after: int | str | None,
) -> Steps[KeyedGeneration]:
    """create + wait: the succeeded generation, or the error of a failed or rejected one."""
    key = idempotency_key or new_idempotency_key()
    created = yield from create(settings, body, fields, key, cancel_after=cancel_after)
    try:
        done = yield from _waiting.wait(settings, created, timeout, on_update, poll_interval, key, use_events)
    except Exception as error:
        raise with_key(error, key) from None
    return finished(done, key)


def cancel(generation_id: str) -> Steps[Generation]:
    try:
        answer: Response = yield Call(cancel_request(generation_id))
    except ApiError as error:
        route_missing(error, "POST /v1/generations/{id}/cancel")
    return Generation.model_validate(answer.data)


def find_by_idempotency_key(key: str) -> Steps[Generation | None]:
    page = yield from fetch(
        ListFilters(limit=1, idempotency_key=key).request(None), GenerationList.model_validate
    )
    if not page.data:
        return None
    # An API without the filter ignores it and lists the newest generation: a key that cannot
    # exist must then list nothing, or the answer above means nothing.
    probe_filters = ListFilters(limit=1, idempotency_key=f"probe-{new_idempotency_key()}")
    probe = yield from fetch(probe_filters.request(None), GenerationList.model_validate)
    if probe.data:
        raise filter_ignored()
    return page.data[0]


def quote(body: Body, fields: Mapping[str, Any]) -> Steps[Quote]:
    try:
        answer: Response = yield Call(quote_request(request_body(body, fields)))
    except ApiError as error:
        route_missing(error, "POST /v1/generations/quote")
    return Quote.model_validate(answer.data)
