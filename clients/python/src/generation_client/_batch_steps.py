"""client.batches' methods as steps (``_steps``), the same for Client and AsyncClient: the resources
(``_batches``, ``_batches_async``) only hand them to their driver."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from . import _batch_requests as b
from ._core import Request, Settings, prepare, refusal
from ._download import SavedFile
from ._pager import Listing
from ._requests import new_idempotency_key
from ._steps import Close, Emit, Open, Save, Sleep, Steps, Stream, fetch, next_piece
from .errors import ApiError, BatchWaitTimeoutError, ConnectionError
from .retry_policy import backoff, is_retryable_status
from .types import Batch, BatchList, BatchQuote, BatchResultLine

OnBatch = Callable[[Batch], None]
OnLine = Callable[[BatchResultLine, list[SavedFile]], None]
DEFAULT_WAIT = 24 * 3600.0


def create(
    requests: b.Lines | None,
    jsonl: b.Jsonl | None,
    completion_window: str | None,
    metadata: Mapping[str, str] | None,
    webhook: Mapping[str, Any] | None,
    idempotency_key: str | None,
) -> Steps[Batch]:
    key = idempotency_key or new_idempotency_key()
    request = b.batch_request(
        "/batches", requests, jsonl, completion_window, metadata, idempotency_key=key, webhook=webhook
    )
    return (yield from fetch(request, Batch.model_validate))


def quote(requests: b.Lines | None, jsonl: b.Jsonl | None) -> Steps[BatchQuote]:
    request = b.batch_request("/batches/quote", requests, jsonl, None, None)
    return (yield from fetch(request, BatchQuote.model_validate))


def get(batch_id: str) -> Steps[Batch]:
    return (yield from fetch(Request("GET", b.batch_path(batch_id)), Batch.model_validate))


def listing(limit: int | None, cursor: str | None) -> Listing[Batch]:
    return Listing(partial(b.list_request, limit), BatchList.model_validate, cursor)


def cancel(batch_id: str) -> Steps[Batch]:
    return (yield from fetch(Request("POST", f"{b.batch_path(batch_id)}/cancel"), Batch.model_validate))


class ResultsReader:
    """GET /v1/batches/{id}/results, line by line, as the lines arrive. A dropped connection (or a
    read the server cut short) is resumed after the last line read, ``max_retries`` times in a row."""

    def __init__(self, settings: Settings, batch_id: str, after: int | None) -> None:
        self.settings = settings
        self.batch_id = batch_id
        self.last = -1 if after is None else after
        self.failures = 0
        self.stream: Stream | None = None

    def next(self) -> Steps[BatchResultLine | None]:
        """The next line, or None once the results are read (the stream is then closed)."""
        while True:
            try:
                if self.stream is None:
                    self.stream = yield from self._open()
                while (text := (yield from next_piece(self.stream))) is not None:
                    if (line := b.parse_line(text)) is not None:
                        self.last, self.failures = line.line, 0
                        return line
            except (httpx.TransportError, ApiError) as error:
                retryable = not isinstance(error, ApiError) or is_retryable_status(error.status)
                if not retryable or self.failures >= self.settings.max_retries:
                    if isinstance(error, httpx.TransportError):
                        raise ConnectionError(f"GET results of {self.batch_id}: {error}") from error
                    raise
                yield from self._close()
                yield Sleep(backoff(self.failures))
                self.failures += 1
                continue
            yield from self._close()
            return None

    def _open(self) -> Steps[Stream]:
        request = b.results_request(self.batch_id, self.last)
        stream: Stream = yield Open(prepare(self.settings, request), lines=True)
        if not stream.answer.is_success:
            yield Close(stream)
            raise refusal(request, stream.answer)
        return stream

    def _close(self) -> Steps[None]:
        if self.stream is not None:
            yield Close(self.stream)
            self.stream = None


def results(settings: Settings, batch_id: str, after: int | None) -> Steps[None]:
    reader = ResultsReader(settings, batch_id, after)
    while (line := (yield from reader.next())) is not None:
        yield Emit(line)


def wait(
    batch: str | Batch, timeout: float | None, on_update: OnBatch | None, poll_interval: float
) -> Steps[Batch]:
    batch_id = batch if isinstance(batch, str) else batch.id
    limit = DEFAULT_WAIT if timeout is None else timeout
    deadline = time.monotonic() + limit
    seen, pause = "", poll_interval
    while True:
        current = yield from get(batch_id)
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
        yield Sleep(min(b.jittered(pause), left))


def download(
    settings: Settings,
    batch_id: str,
    directory: Path,
    follow: bool,
    on_line: OnLine | None,
    on_batch: OnBatch | None,
    poll_interval: float,
) -> Steps[b.BatchDownload]:
    done, seen = b.BatchDownload(batch_id), b.Seen()
    pause, last = poll_interval, ""
    while True:
        batch = yield from get(batch_id)
        if batch.model_dump_json() != last and on_batch:
            on_batch(batch)
        last = batch.model_dump_json()
        fresh = 0
        reader = ResultsReader(settings, batch_id, seen.read)
        while (line := (yield from reader.next())) is not None:
            if line.line in seen.lines:
                continue
            fresh += 1
            saved: list[SavedFile] = []
            if line.generation is not None and line.generation.status == "succeeded":
                saved = yield Save(line.generation, directory / b.folder_of(line.custom_id))
            record_line(done, seen, line, saved, on_line)
        counts = batch.request_counts
        if not follow or (batch.is_terminal and (done.lines >= counts.total or counts.queued == 0)):
            return done
        pause = b.next_pause(pause, poll_interval, fresh > 0)
        yield Sleep(min(pause, 15.0))


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
