"""The scenarios run against a real API: GENERATION_BASE_URL and GENERATION_API_KEY (a funded key)
name it; GENERATION_PAGING_API_KEY is a key whose account holds 250 generations. Every scenario
runs twice, with Client and with AsyncClient (the ``kind`` parameter)."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest

from generation_client import AsyncClient, Client

from .relay import FaultyFront

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


async def resolve(value: Awaitable[T] | T) -> T:
    """The value of a sync call, or the awaited value of an async one: one test body for both clients."""
    if inspect.isawaitable(value):
        return await value
    return value


async def collect(items: Iterable[T] | AsyncIterable[T]) -> list[T]:
    if isinstance(items, AsyncIterable):
        return [item async for item in items]
    return list(items)
