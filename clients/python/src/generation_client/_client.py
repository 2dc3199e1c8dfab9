"""The Generation API: ``client.batches`` (many generations from one list or JSONL file),
``client.generations`` (with a generation's event stream, ``events``),
``client.events()`` (the account's event stream), ``client.models``, ``client.credits``, ``client.key``,
``client.webhooks`` (the signing secret; ``verify`` / ``unwrap``, also ``generation_client.webhooks``
without a client) and ``client.download``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Generator
from types import TracebackType

import httpx

from ._batches import Batches
from ._batches_async import AsyncBatches
from ._catalog import AsyncCredits, AsyncKey, AsyncModels, Credits, Key, Models
from ._core import OnRetry, Settings
from ._download import SavedFile, download_async, download_sync
from ._events import events
from ._generations import AsyncGenerations, Generations
from ._http import AsyncHttp, SyncHttp
from ._sse import AccountEventsState
from ._version import __version__
from ._webhooks_resource import AsyncWebhooks, Webhooks
from .errors import MissingApiKeyError
from .types import AccountEvent, Generation

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
DEFAULT_MAX_RETRIES = 3
DEFAULT_TIMEOUT = 60.0


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _settings(
    api_key: str | None, base_url: str | None, max_retries: int, timeout: float, on_retry: OnRetry | None
) -> Settings:
    key = api_key or _env("GENERATION_API_KEY")
    if not key:
        raise MissingApiKeyError("No API key: pass api_key= or set GENERATION_API_KEY.")
    url = (base_url or _env("GENERATION_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    user_agent = f"generation-service-client-python/{__version__}"
    return Settings(key, url, max_retries, timeout, user_agent, on_retry)


class Client:
    """The Generation API, blocking. ``api_key`` defaults to GENERATION_API_KEY, ``base_url`` (ends
    with /v1) to GENERATION_BASE_URL, else http://127.0.0.1:8080/v1. ``max_retries``: retries after the
    first attempt (network errors, timeouts, 408, 429, 500, 502, 503, 504). ``timeout``: seconds per
    attempt (connect, and between bytes of the answer). ``on_retry``: told before each retry's sleep.
    ``http_client``: your own httpx.Client (proxies, transports); it is not closed by ``close()``."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        on_retry: OnRetry | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._settings = _settings(api_key, base_url, max_retries, timeout, on_retry)
        self._owns_client = http_client is None
        self._client = http_client or httpx.Client()
        http = SyncHttp(self._settings, self._client)
        self._http = http
        self.generations = Generations(http)
        self.batches = Batches(http)
        self.models = Models(http)
        self.credits = Credits(http)
        self.key = Key(http)
        self.webhooks = Webhooks(http)

    @property
    def base_url(self) -> str:
        return self._settings.base_url

    def events(
        self, *, last_event_id: str | None = None, on_open: Callable[[], None] | None = None
    ) -> Generator[AccountEvent]:
        """GET /v1/events as Server-Sent Events: every event of every generation of the account, as it
        is committed (``item.event``, under ``item.cursor``), from now on, or after ``last_event_id``
        (an event's ``cursor``, from this process or an earlier one). It has no end: ``break`` out of
        it. "Now" is pinned before the stream opens (one JSON read); drops and API restarts are then
        resumed with Last-Event-ID: no event is lost or given twice. ``on_open`` is called each time
        the stream is open. One stream for the account instead of one per generation."""
        return self._http.iterate(events(AccountEventsState(self._settings, last_event_id, on_open)))

    def download(self, generation: Generation, directory: str | os.PathLike[str]) -> list[SavedFile]:
        """Streams every output of a generation into ``directory`` (created if missing): the paths and
        sizes. No API key is sent to the result host. An existing file raises DownloadError."""
        return download_sync(self._client, generation, directory)

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient:
    """The Generation API for asyncio (and trio, through anyio): the same options and methods as
    Client, each awaited; ``async for`` walks a list."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        on_retry: OnRetry | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._settings = _settings(api_key, base_url, max_retries, timeout, on_retry)
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient()
        http = AsyncHttp(self._settings, self._client)
        self._http = http
        self.generations = AsyncGenerations(http)
        self.batches = AsyncBatches(http)
        self.models = AsyncModels(http)
        self.credits = AsyncCredits(http)
        self.key = AsyncKey(http)
        self.webhooks = AsyncWebhooks(http)

    @property
    def base_url(self) -> str:
        return self._settings.base_url

    def events(
        self, *, last_event_id: str | None = None, on_open: Callable[[], None] | None = None
    ) -> AsyncGenerator[AccountEvent]:
        """``async for event in client.events()``: as Client.events. Leaving the loop early closes the
        connection when the iterator is collected; ``contextlib.aclosing`` closes it at once."""
        return self._http.iterate(events(AccountEventsState(self._settings, last_event_id, on_open)))

    async def download(self, generation: Generation, directory: str | os.PathLike[str]) -> list[SavedFile]:
        return await download_async(self._client, generation, directory)

    async def close(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()
