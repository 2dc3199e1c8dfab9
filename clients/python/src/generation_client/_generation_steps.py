"""client.generations' methods as steps (``_steps``), the same for Client and AsyncClient: the
resources (``_generations``) only hand them to their driver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _waiting
from ._core import Response, Settings
from ._pager import Listing
from ._requests import (
    Body,
    ListFilters,
    cancel_request,
    create_request,
    events_request,
    filter_ignored,
    finished,
    get_request,
    keyed,
    new_idempotency_key,
    quote_request,
    request_body,
    route_missing,
    with_key,
)
from ._steps import Call, Steps, fetch
from ._wait_state import OnUpdate
from .errors import ApiError
from .types import Generation, GenerationEvent, GenerationEventList, GenerationList, KeyedGeneration, Quote


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


def listing(filters: ListFilters) -> Listing[Generation]:
    return Listing(filters.request, GenerationList.model_validate, filters.cursor)


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
