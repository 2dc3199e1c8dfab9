"""The client's logic is written once, as steps that do no I/O (``_steps``), and run by one of two
drivers (Client's, AsyncClient's). Here the steps are driven by hand, answer by answer, with no
server and no socket; then both drivers run the same steps against a port where nothing listens.
Needs no stack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from generation_client import AsyncClient, AsyncPager, Client, Pager, RetryEvent, ServiceUnavailableError
from generation_client._core import Request, Response, Settings, prepare
from generation_client._http import AsyncHttp, SyncHttp
from generation_client._pager import Listing
from generation_client._steps import Call, Emit, Open, Send, Sleep, Steps, Stream, attempts, streamed

BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens


def settings(on_retry: Any = None) -> Settings:
    return Settings("sk_test", BASE_URL, 2, 5.0, "test", on_retry)


def test_a_request_and_its_retries_are_steps_that_do_no_io() -> None:
    told: list[RetryEvent] = []
    request = Request("POST", "/generations", body={"prompt": "p"}, idempotency_key="key-1")
    steps = attempts(settings(told.append), request)

    first = next(steps)
    assert isinstance(first, Send)
    assert first.prepared.headers["idempotency-key"] == "key-1"
    pause = steps.send(httpx.Response(503, json={"error": {"code": "unavailable", "message": "busy"}}))
    assert isinstance(pause, Sleep)
    assert 0 <= pause.seconds < 0.5
    # The next attempt sends the same bytes; a network error is thrown in where the answer would be.
    assert steps.send(None) == first
    assert isinstance(steps.throw(httpx.ConnectError("refused")), Sleep)
    assert steps.send(None) == first
    # The retries are spent (max_retries=2): the error is raised out of the steps.
    with pytest.raises(ServiceUnavailableError):
        steps.send(httpx.Response(503))
    assert [(e.attempt, e.status, type(e.error).__name__) for e in told] == [
        (1, 503, "ServiceUnavailableError"),
        (2, None, "ConnectionError"),
    ]


@dataclass
class Body:
    data: list[int]
    next_cursor: str | None


def test_a_list_is_walked_by_one_listing_each_page_asked_for_once_the_last_is_used_up() -> None:
    listing = Listing(
        lambda cursor: Request("GET", "/things", query={"cursor": cursor}),
        lambda data: Body(data["data"], data["next"]),
        cursor="c1",
    )
    steps = listing.items()

    def page(data: list[int], after: str | None) -> Response:
        return Response(200, httpx.Headers(), {"data": data, "next": after}, None)

    first = next(steps)
    assert isinstance(first, Call)
    assert first.request.query == {"cursor": "c1"}
    assert steps.send(page([1, 2], "c2")) == Emit(1)
    assert steps.send(None) == Emit(2)
    second = steps.send(None)
    assert isinstance(second, Call)
    assert second.request.query == {"cursor": "c2"}
    assert steps.send(page([3], None)) == Emit(3)
    with pytest.raises(StopIteration):
        steps.send(None)


def test_every_list_of_both_clients_is_the_one_pager() -> None:
    client, async_client = Client("sk_test", base_url=BASE_URL), AsyncClient("sk_test", base_url=BASE_URL)
    assert type(client.generations.list()) is type(client.batches.list()) is Pager
    assert type(async_client.generations.list()) is type(async_client.batches.list()) is AsyncPager


def refused(emit: bool) -> Steps[str]:
    """Sleeps, opens a stream where nothing listens (the driver throws the refusal in), and returns
    (or emits) the name of what was thrown."""
    yield Sleep(0)
    opening = Open(prepare(settings(), Request("GET", "/events")))
    try:
        yield from streamed(opening, read_nothing)
    except httpx.ConnectError as error:
        if emit:
            yield Emit(type(error).__name__)
        return type(error).__name__
    return "opened"


def read_nothing(stream: Stream) -> Steps[None]:
    raise AssertionError(f"opened {stream.answer}")
    yield


@pytest.mark.anyio
async def test_both_drivers_run_the_same_steps_to_the_same_end() -> None:
    with httpx.Client() as client:
        sync = SyncHttp(settings(), client)
        assert sync.run(refused(emit=False)) == "ConnectError"
        assert list(sync.iterate(refused(emit=True))) == ["ConnectError"]
    async with httpx.AsyncClient() as async_client:
        asynchronous = AsyncHttp(settings(), async_client)
        assert await asynchronous.run(refused(emit=False)) == "ConnectError"
        assert [item async for item in asynchronous.iterate(refused(emit=True))] == ["ConnectError"]
