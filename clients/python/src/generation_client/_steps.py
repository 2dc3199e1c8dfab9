"""Every operation of the client written once, for Client and AsyncClient, as steps: a generator
that yields the I/O it needs (the ops below) and is sent what that I/O gave, or has its exception
thrown in at the ``yield``. The steps hold every decision (what to ask, how to read the answer,
when to retry, pause or stop); the two drivers (``_http.SyncHttp``, ``_http.AsyncHttp``) do the
I/O and nothing else, so that the clients cannot drift apart. Steps compose with ``yield from``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx

from ._core import (
    Prepared,
    Request,
    Response,
    Settings,
    outcome,
    prepare,
    retry_delay,
    retry_event,
    transport_error,
)
from .types import Generation

R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    """An API request with the retry policy (``attempts``): sent its Response; the ApiError or
    ConnectionError it ends with is thrown in."""

    request: Request


@dataclass(frozen=True)
class Send:
    """One attempt: sent the httpx.Response, read whole; an httpx.TransportError is thrown in.
    ``content``: the body, or the path of a file streamed as it is sent."""

    prepared: Prepared
    content: bytes | Path | None


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Open:
    """A streamed request: sent its Stream once the answer's head has come (an answer that is not a
    2xx is read whole). ``lines``: its pieces are lines, else text as it arrives. ``deadline`` (a
    ``time.monotonic()``): a read blocked then is cut, and DeadlineError thrown in."""

    prepared: Prepared
    lines: bool = False
    timeout: float | None = None
    deadline: float | None = None


@dataclass
class Stream:
    """An open answer (the driver's: its pieces are an iterator, or an async one)."""

    answer: httpx.Response
    pieces: Any
    deadline: float | None
    #: The sync driver's: what cuts the stream's socket at the deadline.
    cut: Any = None


@dataclass(frozen=True)
class Next:
    """The next piece of an open stream: sent a str, or None at its end."""

    stream: Stream


@dataclass(frozen=True)
class Close:
    """Closes a stream (also closed when the steps end, whichever way)."""

    stream: Stream


@dataclass(frozen=True)
class Save:
    """Every output of a generation into ``folder``, files already there kept: sent the SavedFiles."""

    generation: Generation
    folder: Path


@dataclass(frozen=True)
class Emit:
    """An item for the caller of an iteration (``for`` / ``async for``)."""

    item: object


Op = Call | Send | Sleep | Open | Next | Close | Save | Emit
Steps = Generator[Op, Any, R]


class DeadlineError(Exception):
    """A stream's deadline came while it was read: thrown in at its Next (or Open)."""


class Stepper(Generic[R]):
    """Steps as a driver runs them: ``op()`` is what they ask next, None once they have returned
    (``value``); the driver sets ``reply`` (or ``error``) to what the op gave before the next."""

    def __init__(self, steps: Steps[R]) -> None:
        self._steps = steps
        self.reply: Any = None
        self.error: Exception | None = None
        self.value: Any = None

    def op(self) -> Op | None:
        reply, error = self.reply, self.error
        self.reply, self.error = None, None
        try:
            return self._steps.send(reply) if error is None else self._steps.throw(error)
        except StopIteration as stop:
            self.value = stop.value
            return None


def attempts(settings: Settings, request: Request) -> Steps[Response]:
    """One request with the retry policy (network errors, timeouts, 408, 429, 5xx): every attempt
    sends the same bytes and Idempotency-Key; the failure that is not retried is raised."""
    prepared = prepare(settings, request)
    content = prepared.content if request.upload is None else request.upload
    attempt = 0
    while True:
        try:
            answer: httpx.Response = yield Send(prepared, content)
            result = outcome(request, answer)
        except httpx.TransportError as error:
            result = transport_error(request, prepared, error)
        if isinstance(result, Response):
            return result
        delay = retry_delay(result, attempt, settings.max_retries)
        if delay is None:
            raise result
        if settings.on_retry:
            settings.on_retry(retry_event(request, attempt, delay, result))
        yield Sleep(delay)
        attempt += 1


def fetch(request: Request, parse: Callable[[Any], R]) -> Steps[R]:
    """One call, its answer's body read by ``parse`` (a model's ``model_validate``)."""
    answer: Response = yield Call(request)
    return parse(answer.data)


def next_piece(stream: Stream) -> Steps[str | None]:
    piece: str | None = yield Next(stream)
    return piece


def streamed(op: Open, read: Callable[[Stream], Steps[R]]) -> Steps[R]:
    """``read`` the stream ``op`` opens, then close it, on an error too (as ``with client.stream()``)."""
    stream: Stream = yield op
    try:
        value = yield from read(stream)
    except Exception:
        yield Close(stream)
        raise
    yield Close(stream)
    return value
