"""wait() on the generation's event stream (GET /v1/generations/{id}/events): one connection for the
whole wait, however long, counted once against the rate limit, where held GETs ask again every 50 s.
The steps return the terminal generation, raise WaitTimeoutError at the deadline, or return None
when the stream cannot serve (an API without it, the stream cap, an answer that is no event stream,
a stream that keeps failing past ``max_retries`` in a row): the caller then holds GETs for the time
left, which also surfaces the errors that are not the stream's (401, 404). A dropped connection is
first resumed with Last-Event-ID, as ``generations.events()`` does.

Its own connection loop rather than ``generations.events()``: a wait must end at its deadline even
while a read is blocked between two keep-alives (15 s apart), and must not leave the stream open
behind it. The stream is opened with the deadline: the drivers cut a read blocked then (the sync
one shuts the socket, the async one cancels the read) and throw DeadlineError in.
"""

from __future__ import annotations

import time
from functools import partial

import httpx

from ._core import Request, Settings, prepare, refusal, retry_event, transport_error
from ._sse import EventsState, SseParser
from ._steps import DeadlineError, Open, Sleep, Steps, Stream, next_piece, streamed
from ._wait_state import WaitState
from .errors import ApiError, ConnectionError
from .types import Generation


class _NotServedError(Exception):
    """A 2xx that is no event stream (or a 204: every event seen): the held GETs take the wait over."""


def stream_wait(settings: Settings, wait: WaitState) -> Steps[Generation | None]:
    events = EventsState(settings, wait.id, None)
    while True:
        remaining = wait.deadline - time.monotonic()
        if remaining <= 0:
            raise wait.timed_out()
        request = events.request()
        prepared = prepare(settings, request)
        opening = Open(prepared, timeout=min(prepared.timeout, remaining), deadline=wait.deadline)
        try:
            read = yield from streamed(opening, partial(_read, events, wait, request))
        except DeadlineError:
            raise wait.timed_out() from None
        except _NotServedError:
            return None
        except httpx.TransportError as error:
            read = transport_error(request, prepared, error)
        if isinstance(read, Generation):
            return read
        pause = _pause(settings, events, wait, request, read)
        if pause is None:
            return None
        yield Sleep(pause)


def _read(
    events: EventsState, wait: WaitState, request: Request, stream: Stream
) -> Steps[Generation | ApiError | None]:
    """One connection: the terminal generation once an event shows it, its refusal, else None (the
    stream ended before the generation did)."""
    answer = stream.answer
    if not answer.is_success:
        return refusal(request, answer)
    content_type = answer.headers.get("content-type", "")
    if answer.status_code != 200 or not content_type.startswith("text/event-stream"):
        raise _NotServedError
    parser = SseParser()
    # The deadline between pieces, too: a stream the driver cannot cut stops at its next piece.
    while time.monotonic() < wait.deadline and (text := (yield from next_piece(stream))) is not None:
        for message in parser.feed(text):
            event = events.take(message)
            if event is not None and (done := wait.take(event.data)) is not None:
                return done
    return None


def _pause(
    settings: Settings,
    events: EventsState,
    wait: WaitState,
    request: Request,
    failure: ApiError | ConnectionError | None,
) -> float | None:
    """Seconds before the next connection (the server's ``retry`` after a clean end, the backoff
    after a failure); None when the stream is not worth another try; WaitTimeoutError when the
    deadline has come."""
    if failure is None:
        delay = events.reconnect
    else:
        try:
            delay = events.after_failure(failure)
        except (ApiError, ConnectionError):
            return None
        if settings.on_retry:
            settings.on_retry(retry_event(request, events.failures - 1, delay, failure))
    remaining = wait.deadline - time.monotonic()
    if remaining <= 0:
        raise wait.timed_out()
    return min(delay, remaining)
