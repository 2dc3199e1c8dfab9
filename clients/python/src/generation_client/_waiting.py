"""Waiting for a generation to end. A wait whose deadline is longer than one held request
(``MAX_HOLD_SECONDS``) reads the generation's event stream (``_event_waiting``), as the TypeScript
client's does. Otherwise, or when the stream cannot serve, it asks the server to hold each GET
(``Prefer: wait=N``); when an answer shows it did not (no ``Preference-Applied``), it polls every
2-3 s or after its Retry-After, conditionally (If-None-Match), so an unchanged generation costs a
304. The steps below serve both clients; ``WaitState`` (``_wait_state``) holds every decision.
"""

from __future__ import annotations

from ._core import Response, Settings
from ._event_waiting import stream_wait
from ._steps import Call, Sleep, Steps
from ._wait_state import OnUpdate, WaitState
from .types import Generation


def wait(
    settings: Settings,
    start: str | Generation,
    timeout: float | None,
    on_update: OnUpdate | None,
    poll_interval: float,
    idempotency_key: str | None = None,
    use_events: bool | None = None,
) -> Steps[Generation]:
    state = WaitState(start, timeout, on_update, poll_interval, idempotency_key)
    if not state.done() and state.reads_events(use_events):
        if streamed := (yield from stream_wait(settings, state)):
            return streamed
        state.after_stream()
    while not (done := state.done()):
        answer: Response = yield Call(state.next_request())
        if pause := state.answered(answer):
            yield Sleep(pause)
    return done
