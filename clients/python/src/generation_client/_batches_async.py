"""client.batches for AsyncClient: the same methods as Batches, each awaited (``async for`` over
``list`` and ``results``)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx

from . import _batch_requests as b
from . import _requests as r
from ._batch_pager import AsyncBatchPager
from ._batches import DEFAULT_WAIT, OnBatch, OnLine, record_line
from ._core import Request, outcome, prepare
from ._download import SavedFile, download_async
from ._events import events_async
from ._http import AsyncHttp
from ._sse import BatchEventsState
from .errors import ApiError, BatchWaitTimeoutError, ConnectionError
from .retry_policy import backoff, is_retryable_status
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
        key = idempotency_key or r.new_idempotency_key()
        request = b.batch_request(
            "/batches",
            requests,
            jsonl,
            completion_window,
            metadata,
            asynchronous=True,
            idempotency_key=key,
            webhook=webhook,
        )
        return Batch.model_validate((await self._http.request(request)).data)

    async def quote(self, requests: b.Lines | None = None, *, jsonl: b.Jsonl | None = None) -> BatchQuote:
        request = b.batch_request("/batches/quote", requests, jsonl, None, None, asynchronous=True)
        return BatchQuote.model_validate((await self._http.request(request)).data)

    async def get(self, batch_id: str) -> Batch:
        answer = await self._http.request(Request("GET", b.batch_path(batch_id)))
        return Batch.model_validate(answer.data)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> AsyncBatchPager:
        """``async for batch in client.batches.list()``: every page, each fetched when needed."""
        return AsyncBatchPager(self._http, limit, cursor)

    async def cancel(self, batch_id: str) -> Batch:
        answer = await self._http.request(Request("POST", f"{b.batch_path(batch_id)}/cancel"))
        return Batch.model_validate(answer.data)

    def events(self, batch_id: str, *, last_event_id: int | None = None) -> AsyncIterator[BatchEvent]:
        """``async for event in client.batches.events(id)``: as Batches.events."""
        return events_async(self._http, BatchEventsState(self._http.settings, batch_id, last_event_id))

    async def results(self, batch_id: str, *, after: int | None = None) -> AsyncIterator[BatchResultLine]:
        """``async for line in client.batches.results(id)``: as Batches.results."""
        last = -1 if after is None else after
        failures = 0
        while True:
            prepared = prepare(self._http.settings, b.results_request(batch_id, last))
            try:
                async with self._http.client.stream(
                    "GET",
                    prepared.url,
                    params=prepared.params,
                    headers=prepared.headers,
                    timeout=prepared.timeout,
                ) as response:
                    if not response.is_success:
                        await response.aread()
                        failure = outcome(b.results_request(batch_id, last), response)
                        if isinstance(failure, ApiError):
                            raise failure
                    async for text in response.aiter_lines():
                        line = b.parse_line(text)
                        if line is not None:
                            last = line.line
                            failures = 0
                            yield line
                return
            except (httpx.TransportError, ApiError) as error:
                retryable = not isinstance(error, ApiError) or is_retryable_status(error.status)
                if not retryable or failures >= self._http.settings.max_retries:
                    if isinstance(error, httpx.TransportError):
                        raise ConnectionError(f"GET results of {batch_id}: {error}") from error
                    raise
                await anyio.sleep(backoff(failures))
                failures += 1

    async def wait(
        self,
        batch: str | Batch,
        *,
        timeout: float | None = None,
        on_update: OnBatch | None = None,
        poll_interval: float = 1.0,
    ) -> Batch:
        batch_id = batch if isinstance(batch, str) else batch.id
        limit = DEFAULT_WAIT if timeout is None else timeout
        deadline = time.monotonic() + limit
        seen, pause = "", poll_interval
        while True:
            current = await self.get(batch_id)
            now = current.model_dump_json()
            if now != seen and on_update:
                on_update(current)
            pause = b.next_pause(pause, poll_interval, now != seen)
            seen = now
            if current.is_terminal:
                return current
            left = deadline - time.monotonic()
            if left <= 0:
                raise BatchWaitTimeoutError(batch_id, current, limit)
            await anyio.sleep(min(b.jittered(pause), left))

    async def download(
        self,
        batch_id: str,
        directory: str | os.PathLike[str],
        *,
        follow: bool = True,
        on_line: OnLine | None = None,
        on_batch: OnBatch | None = None,
        poll_interval: float = 1.0,
    ) -> b.BatchDownload:
        done, seen = b.BatchDownload(batch_id), b.Seen()
        pause, last = poll_interval, ""
        while True:
            batch = await self.get(batch_id)
            if batch.model_dump_json() != last and on_batch:
                on_batch(batch)
            last = batch.model_dump_json()
            fresh = 0
            async for line in self.results(batch_id, after=seen.read):
                if line.line in seen.lines:
                    continue
                fresh += 1
                saved: list[SavedFile] = []
                if line.generation is not None and line.generation.status == "succeeded":
                    folder = Path(directory) / b.folder_of(line.custom_id)
                    saved = await download_async(
                        self._http.client, line.generation, folder, skip_existing=True
                    )
                record_line(done, seen, line, saved, on_line)
            counts = batch.request_counts
            if not follow or (batch.is_terminal and (done.lines >= counts.total or counts.queued == 0)):
                return done
            pause = b.next_pause(pause, poll_interval, fresh > 0)
            await anyio.sleep(min(pause, 15.0))
