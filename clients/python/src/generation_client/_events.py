"""The event streams as Server-Sent Events, event by event: ``generations.events(id)`` (GET
/v1/generations/{id}/events, until the generation is terminal: the server then ends the stream, or
answers 204 when every event was seen) and the account's ``events()`` (GET /v1/events, without end).
A dropped connection is reopened with Last-Event-ID: no event is lost or given twice. The two loops
below are the same steps around a ``_sse.StreamState``; only the I/O differs."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Generator

import anyio
import httpx

from ._core import Response, outcome, prepare, transport_error
from ._http import AsyncHttp, SyncHttp, retry_event
from ._sse import SseParser, StreamState, T
from .errors import ApiError, ConnectionError


def events_sync(http: SyncHttp, state: StreamState[T]) -> Generator[T]:
    if (pin := state.pin_request()) is not None:
        state.pinned(http.request(pin).data)
    while True:
        request = state.request()
        prepared = prepare(http.settings, request)
        failure: ApiError | ConnectionError | None = None
        try:
            with http.client.stream(
                "GET", prepared.url, headers=prepared.headers, timeout=prepared.timeout
            ) as answer:
                if answer.status_code == 204:
                    return
                if answer.is_success:
                    state.opened()
                    parser = SseParser()
                    for text in answer.iter_text():
                        for message in parser.feed(text):
                            if (event := state.take(message)) is not None:
                                yield event
                    if state.ended:
                        return
                else:
                    answer.read()
                    failure = _error(outcome(request, answer))
        except httpx.TransportError as error:
            if state.ended:
                return  # cut after the terminal event: nothing more was coming
            failure = transport_error(request, prepared, error)
        if failure is None:
            time.sleep(state.reconnect)
            continue
        delay = state.after_failure(failure)
        if http.on_retry:
            http.on_retry(retry_event(request, state.failures - 1, delay, failure))
        time.sleep(delay)


async def events_async(http: AsyncHttp, state: StreamState[T]) -> AsyncGenerator[T]:
    if (pin := state.pin_request()) is not None:
        state.pinned((await http.request(pin)).data)
    while True:
        request = state.request()
        prepared = prepare(http.settings, request)
        failure: ApiError | ConnectionError | None = None
        try:
            async with http.client.stream(
                "GET", prepared.url, headers=prepared.headers, timeout=prepared.timeout
            ) as answer:
                if answer.status_code == 204:
                    return
                if answer.is_success:
                    state.opened()
                    parser = SseParser()
                    async for text in answer.aiter_text():
                        for message in parser.feed(text):
                            if (event := state.take(message)) is not None:
                                yield event
                    if state.ended:
                        return
                else:
                    await answer.aread()
                    failure = _error(outcome(request, answer))
        except httpx.TransportError as error:
            if state.ended:
                return  # cut after the terminal event: nothing more was coming
            failure = transport_error(request, prepared, error)
        if failure is None:
            await anyio.sleep(state.reconnect)
            continue
        delay = state.after_failure(failure)
        if http.on_retry:
            http.on_retry(retry_event(request, state.failures - 1, delay, failure))
        await anyio.sleep(delay)


def _error(result: Response | ApiError) -> ApiError:
    # outcome() answers a Response only for a 2xx, and this is called for the others.
    assert isinstance(result, ApiError)
    return result
