"""The scenarios run against a real API: GENERATION_BASE_URL and GENERATION_API_KEY (a funded key)
name it; GENERATION_PAGING_API_KEY is a key whose account holds 250 generations. Every scenario
runs twice, with Client and with AsyncClient (the ``kind`` parameter)."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar
from urllib.parse import urlparse

import pytest

from generation_client import AsyncClient, Client

from .relay import FaultyFront, Rule, Seen

T = TypeVar("T")
AnyClient = Client | AsyncClient
MakeClient = Callable[..., AnyClient]


def stack_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set: these scenarios need the real stack")
    return value


@pytest.fixture
def fronts() -> Iterator[list[FaultyFront]]:
    """Faulty fronts a scenario starts (append each): closed when it ends."""
    started: list[FaultyFront] = []
    yield started
    for front in started:
        front.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def base_url() -> str:
    return stack_env("GENERATION_BASE_URL").rstrip("/")


@pytest.fixture
def api_key() -> str:
    return stack_env("GENERATION_API_KEY")


@pytest.fixture
def api_target(base_url: str) -> tuple[str, int]:
    url = urlparse(base_url)
    return (url.hostname or "127.0.0.1", url.port or 80)


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_client(kind: str, api_key: str, base_url: str) -> AsyncIterator[MakeClient]:
    """Builds a Client or an AsyncClient (the test's ``kind``) with the stack's key and URL unless told
    otherwise; each is closed after the test."""
    made: list[AnyClient] = []

    def make(**options: Any) -> AnyClient:
        settings: dict[str, Any] = {"api_key": api_key, "base_url": base_url, **options}
        client = Client(**settings) if kind == "sync" else AsyncClient(**settings)
        made.append(client)
        return client

    yield make
    for client in made:
        await resolve(client.close())


class BehindFront(Protocol):
    def __call__(self, rules: list[Rule], **options: Any) -> tuple[AnyClient, FaultyFront]: ...


@pytest.fixture
def behind_front(
    make_client: MakeClient, api_target: tuple[str, int], fronts: list[FaultyFront]
) -> BehindFront:
    """A client (the test's ``kind``, built with ``options``) that reaches the API through a new
    FaultyFront applying ``rules``, and that front (closed when the test ends)."""

    def make(rules: list[Rule], **options: Any) -> tuple[AnyClient, FaultyFront]:
        front = FaultyFront(api_target, rules)
        fronts.append(front)
        return make_client(base_url=front.base_url, **options), front

    return make


def header_of(head: str, name: str) -> str | None:
    """The value of a request's header ``name`` (lower case, as the client sends it), or None."""
    for line in head.split("\r\n"):
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    return None


def last_event_ids(requests: list[Seen]) -> list[str | None]:
    """The Last-Event-ID each request sent (None without one)."""
    return [header_of(seen.head, "last-event-id") for seen in requests]


async def resolve(value: Awaitable[T] | T) -> T:
    """The value of a sync call, or the awaited value of an async one: one test body for both clients."""
    if inspect.isawaitable(value):
        return await value
    return value


async def collect(items: Iterable[T] | AsyncIterable[T]) -> list[T]:
    if isinstance(items, AsyncIterable):
        return [item async for item in items]
    return list(items)
