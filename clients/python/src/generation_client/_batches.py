"""client.batches: create (a list or a JSONL file), quote, get, list, cancel, results, wait, download
(AsyncClient's: _batches_async). Each method hands its steps (``_batch_steps``) to the driver."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from . import _batch_requests as b
from . import _batch_steps as s
from ._events import events
from ._http import SyncHttp
from ._pager import BatchPager, Pager
from ._sse import BatchEventsState
from .types import Batch, BatchEvent, BatchQuote, BatchResultLine

BatchDownload = b.BatchDownload
folder_of = b.folder_of
OnBatch = s.OnBatch
OnLine = s.OnLine


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
        body = (requests, jsonl, completion_window, metadata, webhook, idempotency_key)
        return self._http.run(s.create(*body))

    def quote(self, requests: b.Lines | None = None, *, jsonl: b.Jsonl | None = None) -> BatchQuote:
        """POST /v1/batches/quote: the lines checked as a create checks them, and their total now."""
        return self._http.run(s.quote(requests, jsonl))

    def get(self, batch_id: str) -> Batch:
        return self._http.run(s.get(batch_id))

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> BatchPager:
        """GET /v1/batches, newest first: iterating walks every page, each fetched when needed;
        ``first_page()`` and ``pages()`` give the pages."""
        return Pager(self._http, s.listing(limit, cursor))

    def cancel(self, batch_id: str) -> Batch:
        """POST /v1/batches/{id}/cancel: lines not started end canceled, never charged."""
        return self._http.run(s.cancel(batch_id))

    def events(self, batch_id: str, *, last_event_id: int | None = None) -> Iterator[BatchEvent]:
        """GET /v1/batches/{id}/events as Server-Sent Events: the batch's own events as they happen,
        from the first (or after ``last_event_id``), until its end event (batch.completed, canceled or
        expired). A dropped connection is reopened with Last-Event-ID, as ``generations.events``."""
        return self._http.iterate(events(BatchEventsState(self._http.settings, batch_id, last_event_id)))

    def results(self, batch_id: str, *, after: int | None = None) -> Iterator[BatchResultLine]:
        """GET /v1/batches/{id}/results: the finished lines so far, in input order, as they arrive. A
        dropped connection is resumed after the last line read. While the batch runs, a line ending
        after a later one is not in this read: read again after the first one missing (or download)."""
        return self._http.iterate(s.results(self._http.settings, batch_id, after))

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
        return self._http.run(s.wait(batch, timeout, on_update, poll_interval))

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
        options = (follow, on_line, on_batch, poll_interval)
        return self._http.run(s.download(self._http.settings, batch_id, Path(directory), *options))
