"""No object of the client prints the API key: error trackers (Sentry) and ``pytest --showlocals``
record the repr of every local of a failing frame, and the client's frames hold its settings, its
HTTP cores and the prepared requests. Needs no server: nothing here is sent."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from generation_client import AsyncClient, Client
from generation_client._core import Request, prepare
from generation_client._sse import EventsState

KEY = f"sk_live_{secrets.token_hex(16)}"
BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens: nothing is sent


def reachable(root: object) -> Iterator[object]:
    """``root`` and every object its repr may show or lead to: the client's own objects' attributes,
    the fields a dataclass prints, containers (httpx's and pydantic's insides are not walked)."""
    seen: set[int] = set()
    stack: list[object] = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(item))
        yield item
        if isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)  # pyright: ignore[reportUnknownArgumentType]
        elif dataclasses.is_dataclass(item):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item) if f.repr)
        elif type(item).__module__.startswith("generation_client"):
            stack.extend(vars(item).values())


def objects_of(client: Client | AsyncClient) -> list[object]:
    settings: Any = client._settings  # pyright: ignore[reportPrivateUsage]
    request = Request("POST", "/generations", body={"prompt": "p"}, idempotency_key="k")
    return [
        client,
        client.generations.list(),
        prepare(settings, request),
        EventsState(settings, "gen_x", None),
        EventsState(settings, "gen_x", None).request(),
    ]


@pytest.mark.parametrize("make", [Client, AsyncClient])
def test_no_repr_of_any_object_of_a_client_holds_its_api_key(make: type[Client | AsyncClient]) -> None:
    client = make(KEY, base_url=BASE_URL)
    printed = [(type(o).__name__, repr(o)) for root in objects_of(client) for o in reachable(root)]
    # The walk reached the objects that hold the key (else this test could not fail).
    names = {name for name, _ in printed}
    assert {"Settings", "Prepared", "SyncHttp" if make is Client else "AsyncHttp"} <= names
    assert sorted({name for name, text in printed if KEY in text}) == []
    # The key is still there to be sent.
    assert prepare(client._settings, Request("GET", "/credits")).headers["authorization"] == f"Bearer {KEY}"  # pyright: ignore[reportPrivateUsage]
