"""Waiting for a generation to end. A wait whose deadline is longer than one held request
(``MAX_HOLD_SECONDS``) reads the generation's event stream (``_event_waiting``), as the TypeScript
client's does. Otherwise, or when the stream cannot serve, it asks the server to hold each GET
(``Prefer: wait=N``); when an answer shows it did not (no ``Preference-Applied``), it polls every
2-3 s or after its Retry-After, conditionally (If-None-Match), so an unchanged generation costs a
304. The two loops below are the same steps; ``WaitState`` (``_wait_state``) holds every decision
so that sync and async cannot drift apart.
"""

from __future__ import annotations

import time

import anyio

from ._event_waiting import stream_async, stream_sync
from ._http import AsyncHttp, SyncHttp
from ._wait_state import OnUpdate, WaitState
from .types import Generation


def wait_sync(
    http: SyncHttp,
    start: str | Generation,
    timeout: float | None,
    on_update: OnUpdate | None,
    poll_interval: float,
    idempotency_key: str | None = None,
    use_events: bool | None = None,
) -> Generation:
    state = WaitState(start, timeout, on_update, poll_interval, idempotency_key)
    if not state.done() and state.reads_events(use_events):
        if streamed := stream_sync(http, state):
            return streamed
        state.after_stream()
    while not (done := state.done()):
        pause = state.answered(http.request(state.next_request()))
        if pause:
            time.sleep(pause)
    return done


async def wait_async(
    http: AsyncHttp,
    start: str | Generation,
    timeout: float | None,
    on_update: OnUpdate | None,
    poll_interval: float,
    idempotency_key: str | None = None,
    use_events: bool | None = None,
) -> Generation:
    state = WaitState(start, timeout, on_update, poll_interval, idempotency_key)
    if not state.done() and state.reads_events(use_events):
        if streamed := await stream_async(http, state):
            return streamed
        state.after_stream()
    while not (done := state.done()):
        pause = state.answered(await http.request(state.next_request()))
        if pause:
            await anyio.sleep(pause)
    return done
