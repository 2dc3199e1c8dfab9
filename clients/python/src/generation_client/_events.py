"""The event streams as Server-Sent Events, event by event: ``generations.events(id)`` (GET
/v1/generations/{id}/events, until the generation is terminal: the server then ends the stream, or
answers 204 when every event was seen), ``batches.events(id)`` and the account's ``events()`` (GET
/v1/events, without end). A dropped connection is reopened with Last-Event-ID: no event is lost or
given twice. The steps below are the same for both clients, around a ``_sse.StreamState``; each
event is emitted to the caller's ``for`` / ``async for``."""

from __future__ import annotations

from functools import partial

import httpx

from ._core import Request, Response, prepare, refusal, retry_event, transport_error
from ._sse import SseParser, StreamState, T
from ._steps import Call, Emit, Open, Sleep, Steps, Stream, next_piece, streamed
from .errors import ApiError


def events(state: StreamState[T]) -> Steps[None]:
    if (pin := state.pin_request()) is not None:
        pinned: Response = yield Call(pin)
        state.pinned(pinned.data)
    while True:
        request = state.request()
        prepared = prepare(state.settings, request)
        try:
            failure = yield from streamed(Open(prepared), partial(_read, state, request))
        except httpx.TransportError as error:
            # Cut after the terminal event: nothing more was coming.
            failure = None if state.ended else transport_error(request, prepared, error)
        if state.ended:
            return
        if failure is None:
            yield Sleep(state.reconnect)
            continue
        delay = state.after_failure(failure)
        if state.settings.on_retry:
            state.settings.on_retry(retry_event(request, state.failures - 1, delay, failure))
        yield Sleep(delay)


def _read(state: StreamState[T], request: Request, stream: Stream) -> Steps[ApiError | None]:
    """Reads one connection to its end: its refusal, else None (``state.ended`` when it is over)."""
    answer = stream.answer
    if answer.status_code == 204:
        state.ended = True  # every event was seen
        return None
    if not answer.is_success:
        return refusal(request, answer)
    state.opened()
    parser = SseParser()
    while (text := (yield from next_piece(stream))) is not None:
        for message in parser.feed(text):
            if (event := state.take(message)) is not None:
                yield Emit(event)
    return None
