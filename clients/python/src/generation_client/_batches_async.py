"""client.batches for AsyncClient: the same methods as Batches, each awaited (``async for`` over
``list`` and ``results``), handing the same steps (``_batch_steps``) to the async driver."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from . import _batch_requests as b
from . import _batch_steps as s
from ._events import events
from ._http import AsyncHttp
from ._pager import AsyncBatchPager, AsyncPager
from ._sse import BatchEventsState
from .types import Batch, BatchEvent, BatchQuote, BatchResultLine


class AsyncBatches:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def create(
        self,
        requests: b.Lines | None = None,
        *,
        jsonl: b.Jsonl | None = None,
        completion_window: str | None = None,
        metadata: Mapping[str, str] | None = None,
        webhook: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Batch:
        """As Batches.create: one key per call, reused on every retry; a file is streamed."""
        body = (requests, jsonl, completion_window, metadata, webhook, idempotency_key)
        return await self._http.run(s.create(*body))

    async def quote(self, requests: b.Lines | None = None, *, jsonl: b.Jsonl | None = None) -> BatchQuote:
        return await self._http.run(s.quote(requests, jsonl))

    async def get(self, batch_id: str) -> Batch:
        return await self._http.run(s.get(batch_id))

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> AsyncBatchPager:
        """``async for batch in client.batches.list()``: every page, each fetched when needed."""
        return AsyncPager(self._http, s.listing(limit, cursor))

    async def cancel(self, batch_id: str) -> Batch:
        return await self._http.run(s.cancel(batch_id))

    def events(self, batch_id: str, *, last_event_id: int | None = None) -> AsyncIterator[BatchEvent]:
        """``async for event in client.batches.events(id)``: as Batches.events."""
        return self._http.iterate(events(BatchEventsState(self._http.settings, batch_id, last_event_id)))

    def results(self, batch_id: str, *, after: int | None = None) -> AsyncIterator[BatchResultLine]:
        """``async for line in client.batches.results(id)``: as Batches.results."""
        return self._http.iterate(s.results(self._http.settings, batch_id, after))

    async def wait(
        self,
        batch: str | Batch,
        *,
        timeout: float | None = None,
        on_update: s.OnBatch | None = None,
        poll_interval: float = 1.0,
    ) -> Batch:
        return await self._http.run(s.wait(batch, timeout, on_update, poll_interval))

    async def download(
        self,
        batch_id: str,
        directory: str | os.PathLike[str],
        *,
        follow: bool = True,
        on_line: s.OnLine | None = None,
        on_batch: s.OnBatch | None = None,
        poll_interval: float = 1.0,
    ) -> b.BatchDownload:
        options = (follow, on_line, on_batch, poll_interval)
        return await self._http.run(s.download(self._http.settings, batch_id, Path(directory), *options))
