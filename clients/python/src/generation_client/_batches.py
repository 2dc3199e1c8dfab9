"""client.batches: create (a list or a JSONL file), quote, get, list, cancel, results, wait, download
(AsyncClient's: _batches_async)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from . import _batch_requests as b
from . import _requests as r
from ._batch_pager import BatchPager
from ._core import Request, outcome, prepare
from ._download import SavedFile, download_sync
from ._events import events_sync
from ._http import SyncHttp
from ._sse import BatchEventsState
from .errors import ApiError, BatchWaitTimeoutError, ConnectionError
from .retry_policy import backoff, is_retryable_status
from .types import Batch, BatchEvent, BatchQuote, BatchResultLine

BatchDownload = b.BatchDownload
folder_of = b.folder_of
OnBatch = Callable[[Batch], None]
OnLine = Callable[[BatchResultLine, list[SavedFile]], None]
DEFAULT_WAIT = 24 * 3600.0


class Batches:
    def __init__(self, http: SyncHttp) -> None:
        self._http = http

    def create(
        self,
        requests: b.Lines | None = None,
        *,
        jsonl: b.Jsonl | None = None,
        completion_window: str | None = None,
        metadata: Mapping[str, str] | None = None,
        webhook: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Batch:
        """POST /v1/batches from ``requests`` (each with its ``custom_id``) or ``jsonl`` (a file's path,
        streamed as it is sent, or bytes). Every line is checked before any starts: a bad line is one
        InvalidRequestError naming it. The Idempotency-Key is made once and sent with every retry."""
        key = idempotency_key or r.new_idempotency_key()
        request = b.batch_request(
            "/batches",
            requests,
            jsonl,
            completion_window,
            metadata,
            asynchronous=False,
            idempotency_key=key,
            webhook=webhook,
        )
        return Batch.model_validate(self._http.request(request).data)

    def quote(self, requests: b.Lines | None = None, *, jsonl: b.Jsonl | None = None) -> BatchQuote:
        """POST /v1/batches/quote: the lines checked as a create checks them, and their total now."""
        request = b.batch_request("/batches/quote", requests, jsonl, None, None, asynchronous=False)
        return BatchQuote.model_validate(self._http.request(request).data)

    def get(self, batch_id: str) -> Batch:
        return Batch.model_validate(self._http.request(Request("GET", b.batch_path(batch_id))).data)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> BatchPager:
        """GET /v1/batches, newest first: iterating walks every page, each fetched when needed;
        ``first_page()`` and ``pages()`` give the pages."""
        return BatchPager(self._http, limit, cursor)

    def cancel(self, batch_id: str) -> Batch:
        """POST /v1/batches/{id}/cancel: lines not started end canceled, never charged."""
        answer = self._http.request(Request("POST", f"{b.batch_path(batch_id)}/cancel"))
        return Batch.model_validate(answer.data)

    def events(self, batch_id: str, *, last_event_id: int | None = None) -> Iterator[BatchEvent]:
        """GET /v1/batches/{id}/events as Server-Sent Events: the batch's own events as they happen,
        from the first (or after ``last_event_id``), until its end event (batch.completed, canceled or
        expired). A dropped connection is reopened with Last-Event-ID, as ``generations.events``."""
        return events_sync(self._http, BatchEventsState(self._http.settings, batch_id, last_event_id))

    def results(self, batch_id: str, *, after: int | None = None) -> Iterator[BatchResultLine]:
        """GET /v1/batches/{id}/results: the finished lines so far, in input order, as they arrive. A
        dropped connection is resumed after the last line read. While the batch runs, a line ending
        after a later one is not in this read: read again after the first one missing (or download)."""
        last = -1 if after is None else after
        failures = 0
        while True:
            prepared = prepare(self._http.settings, b.results_request(batch_id, last))
            try:
                with self._http.client.stream(
                    "GET",
                    prepared.url,
                    params=prepared.params,
                    headers=prepared.headers,
                    timeout=prepared.timeout,
                ) as response:
                    if not response.is_success:
                        response.read()
                        failure = outcome(b.results_request(batch_id, last), response)
                        if isinstance(failure, ApiError):
                            raise failure
                    for text in response.iter_lines():
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
                time.sleep(backoff(failures))
                failures += 1

    def wait(
        self,
        batch: str | Batch,
        *,
        timeout: float | None = None,
        on_update: OnBatch | None = None,
        poll_interval: float = 1.0,
    ) -> Batch:
        """The batch once it is completed, canceled or expired. Cheap: the pause between reads grows
        while nothing changes (``poll_interval`` up to 30 s). BatchWaitTimeoutError after ``timeout``
        seconds (default 24 hours); the batch goes on."""
        batch_id = batch if isinstance(batch, str) else batch.id
        limit = DEFAULT_WAIT if timeout is None else timeout
        deadline = time.monotonic() + limit
        seen, pause = "", poll_interval
        while True:
            current = self.get(batch_id)
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
            time.sleep(min(b.jittered(pause), left))

    def download(
        self,
        batch_id: str,
        directory: str | os.PathLike[str],
        *,
        follow: bool = True,
        on_line: OnLine | None = None,
        on_batch: OnBatch | None = None,
        poll_interval: float = 1.0,
    ) -> b.BatchDownload:
        """Every image of a batch into ``directory/<custom_id>/`` as its lines finish (with ``follow``,
        until the batch has ended). Files already there are kept: a resumed download fetches only
        what is missing."""
        done, seen = b.BatchDownload(batch_id), b.Seen()
        pause, last = poll_interval, ""
        while True:
            batch = self.get(batch_id)
            if batch.model_dump_json() != last and on_batch:
                on_batch(batch)
            last = batch.model_dump_json()
            fresh = 0
            for line in self.results(batch_id, after=seen.read):
                if line.line in seen.lines:
                    continue
                fresh += 1
                saved: list[SavedFile] = []
                if line.generation is not None and line.generation.status == "succeeded":
                    folder = Path(directory) / b.folder_of(line.custom_id)
                    saved = download_sync(self._http.client, line.generation, folder, skip_existing=True)
                record_line(done, seen, line, saved, on_line)
            counts = batch.request_counts
            if not follow or (batch.is_terminal and (done.lines >= counts.total or counts.queued == 0)):
                return done
            pause = b.next_pause(pause, poll_interval, fresh > 0)
            time.sleep(min(pause, 15.0))


def record_line(
    done: b.BatchDownload, seen: b.Seen, line: BatchResultLine, saved: list[SavedFile], on_line: OnLine | None
) -> None:
    done.lines += 1
    done.files.extend(saved)
    if not saved:
        done.without_files.append(line)
    seen.add(line.line)
    if on_line:
        on_line(line, saved)
