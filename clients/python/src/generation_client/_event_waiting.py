"""wait() on the generation's event stream (GET /v1/generations/{id}/events): one connection for the
whole wait, however long, counted once against the rate limit, where held GETs ask again every 50 s.
Each loop returns the terminal generation, raises WaitTimeoutError at the deadline, or returns None
when the stream cannot serve (an API without it, the stream cap, an answer that is no event stream,
a stream that keeps failing past ``max_retries`` in a row): the caller then holds GETs for the time
left, which also surfaces the errors that are not the stream's (401, 404). A dropped connection is
first resumed with Last-Event-ID, as ``generations.events()`` does.

Its own connection loop rather than ``generations.events()``: a wait must end at its deadline even
while a read is blocked between two keep-alives (15 s apart), and must not leave the stream open
behind it. The sync loop shuts the stream's socket at the deadline (``_DeadlineCut``); the async
one is cancelled (``anyio.move_on_after``), which closes the response. The decisions are
``_StreamSteps``', shared by both loops so that they cannot drift apart.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Generator

import anyio
import httpx

from ._core import Prepared, Request, Settings, outcome, prepare, transport_error
from ._http import AsyncHttp, OnRetry, SyncHttp, retry_event
from ._sse import EventsState, SseMessage, SseParser
from ._wait_state import WaitState
from .errors import ApiError, ConnectionError
from .types import Generation


class _StreamSteps:
    def __init__(self, settings: Settings, wait: WaitState) -> None:
        self.settings = settings
        self.wait = wait
        self.events = EventsState(settings, wait.id, None)

    def remaining(self) -> float:
        return self.wait.deadline - time.monotonic()

    def next(self) -> tuple[Request, Prepared, float]:
        """The next connection's request and its timeout (never past the deadline), or
        WaitTimeoutError at the deadline."""
        remaining = self.remaining()
        if remaining <= 0:
            raise self.wait.timed_out()
        request = self.events.request()
        prepared = prepare(self.settings, request)
        return request, prepared, min(prepared.timeout, remaining)

    @staticmethod
    def serves(answer: httpx.Response) -> bool:
        """A 2xx that is an event stream (not a 204: every event seen, the generation is over)."""
        content_type = answer.headers.get("content-type", "")
        return answer.status_code == 200 and content_type.startswith("text/event-stream")

    @staticmethod
    def refusal(request: Request, answer: httpx.Response) -> ApiError:
        result = outcome(request, answer)
        # outcome() answers a Response only for a 2xx, and this is called for the others.
        assert isinstance(result, ApiError)
        return result

    def take(self, message: SseMessage) -> Generation | None:
        """The terminal generation, once an event shows it."""
        event = self.events.take(message)
        return None if event is None else self.wait.take(event.data)

    def pause(
        self, request: Request, failure: ApiError | ConnectionError | None, on_retry: OnRetry | None
    ) -> float | None:
        """Seconds before the next connection (the server's ``retry`` after a clean end, the backoff
        after a failure); None when the stream is not worth another try; WaitTimeoutError when the
        deadline has come."""
        if failure is None:
            delay = self.events.reconnect
        else:
            try:
                delay = self.events.after_failure(failure)
            except (ApiError, ConnectionError):
                return None
            if on_retry:
                on_retry(retry_event(request, self.events.failures - 1, delay, failure))
        remaining = self.remaining()
        if remaining <= 0:
            raise self.wait.timed_out()
        return min(delay, remaining)


class _DeadlineCut:
    """At the deadline, shuts down the socket of the stream being read, so that a read blocked until
    the next keep-alive returns at once (and the server sees the stream closed): a read's own
    timeout cannot do it, as each keep-alive starts the next read afresh. Only while ``watching``:
    a connection handed back to the pool is never touched. ``watching`` says whether it can cut; a
    transport without a socket (a custom ``http_client``) cannot, and the loop then checks the
    deadline after each piece read (a keep-alive at the latest)."""

    def __init__(self, deadline: float) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _DeadlineCut:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()

    @contextlib.contextmanager
    def watching(self, answer: httpx.Response) -> Generator[bool]:
        stream: object = answer.extensions.get("network_stream")
        get_extra_info = getattr(stream, "get_extra_info", None)
        found: object = get_extra_info("socket") if callable(get_extra_info) else None
        with self._lock:
            self._socket = found if isinstance(found, socket.socket) else None
            if self.fired:
                self._shut()
        try:
            yield self._socket is not None
        finally:
            with self._lock:
                self._socket = None

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shut()

    def _shut(self) -> None:
        if self._socket is not None:
            # Already closed by the reader (its last read ended): nothing to wake.
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)


def stream_sync(http: SyncHttp, wait: WaitState) -> Generation | None:
    steps = _StreamSteps(http.settings, wait)
    with _DeadlineCut(wait.deadline) as cut:
        while True:
            request, prepared, timeout = steps.next()
            failure: ApiError | ConnectionError | None = None
            try:
                with http.client.stream(
                    "GET", prepared.url, headers=prepared.headers, timeout=timeout
                ) as answer:
                    if not answer.is_success:
                        answer.read()
                        failure = steps.refusal(request, answer)
                    elif not steps.serves(answer):
                        return None
                    else:
                        with cut.watching(answer) as cuttable:
                            parser = SseParser()
                            for text in answer.iter_text():
                                for message in parser.feed(text):
                                    if (done := steps.take(message)) is not None:
                                        return done
                                if not cuttable and steps.remaining() <= 0:
                                    raise wait.timed_out()
            except Exception as error:
                # Whatever a read on a socket shut down under it raises, the deadline is the cause.
                if cut.fired:
                    raise wait.timed_out() from None
                if not isinstance(error, httpx.TransportError):
                    raise
                failure = transport_error(request, prepared, error)
            pause = steps.pause(request, failure, http.on_retry)
            if pause is None:
                return None
            time.sleep(pause)


async def stream_async(http: AsyncHttp, wait: WaitState) -> Generation | None:
    steps = _StreamSteps(http.settings, wait)
    with anyio.move_on_after(max(0.0, steps.remaining())):
        while True:
            request, prepared, timeout = steps.next()
            failure: ApiError | ConnectionError | None = None
            try:
                async with http.client.stream(
                    "GET", prepared.url, headers=prepared.headers, timeout=timeout
                ) as answer:
                    if not answer.is_success:
                        await answer.aread()
                        failure = steps.refusal(request, answer)
                    elif not steps.serves(answer):
                        return None
                    else:
                        parser = SseParser()
                        async for text in answer.aiter_text():
                            for message in parser.feed(text):
                                if (done := steps.take(message)) is not None:
                                    return done
            except httpx.TransportError as error:
                failure = transport_error(request, prepared, error)
            pause = steps.pause(request, failure, http.on_retry)
            if pause is None:
                return None
            await anyio.sleep(pause)
    raise wait.timed_out()
