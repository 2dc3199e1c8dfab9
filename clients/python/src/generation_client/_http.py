"""The two drivers every resource goes through: they run steps (``_steps``) and do the I/O the steps
ask for, and nothing else: SyncHttp with httpx.Client and blocking sleeps, AsyncHttp with
httpx.AsyncClient and anyio. ``run`` gives the steps' value, ``iterate`` the items they emit. A
stream left open when the steps end (returned, raised, or the caller left the loop) is closed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx

from ._core import Request, Response, Settings, build
from ._download import download_async, download_sync
from ._steps import (
    Call,
    Close,
    DeadlineError,
    Emit,
    Next,
    Op,
    Open,
    Save,
    Send,
    Sleep,
    Stepper,
    Steps,
    Stream,
    attempts,
)

R = TypeVar("R")
_CHUNK = 64 * 1024


class SyncHttp:
    def __init__(self, settings: Settings, client: httpx.Client) -> None:
        self.settings = settings
        self.client = client

    def request(self, request: Request) -> Response:
        return self.run(attempts(self.settings, request))

    def run(self, steps: Steps[R]) -> R:
        stepper = Stepper(steps)
        for item in self._drive(stepper):
            raise TypeError(f"{item!r} emitted outside an iteration")
        return stepper.value

    def iterate(self, steps: Steps[object]) -> Generator[Any]:
        return self._drive(Stepper(steps))

    def _drive(self, stepper: Stepper[Any]) -> Generator[Any]:
        opened: list[Stream] = []
        try:
            while (op := stepper.op()) is not None:
                if isinstance(op, Emit):
                    yield op.item
                    continue
                try:
                    stepper.reply = self._do(op, opened)
                except Exception as error:
                    stepper.error = error
        finally:
            for stream in opened:
                _close(stream)

    def _do(self, op: Op, opened: list[Stream]) -> Any:
        match op:
            case Call(request):
                return self.request(request)
            case Send(prepared, content):
                body = _file_chunks(content) if isinstance(content, Path) else content
                return self.client.send(build(self.client, prepared, body))
            case Sleep(seconds):
                time.sleep(seconds)
            case Open(prepared, lines, timeout, deadline):
                answer = self.client.send(build(self.client, prepared, timeout=timeout), stream=True)
                stream = Stream(answer, answer.iter_lines() if lines else answer.iter_text(), deadline)
                opened.append(stream)
                if not answer.is_success:
                    answer.read()
                elif deadline is not None:
                    stream.cut = _DeadlineCut(deadline, answer)
                return stream
            case Next(stream):
                return _next(stream)
            case Close(stream):
                opened.remove(stream)
                _close(stream)
            case Save(generation, folder):
                return download_sync(self.client, generation, folder, skip_existing=True)
            case Emit():
                raise TypeError("an Emit is the driver's")


class AsyncHttp:
    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        self.settings = settings
        self.client = client

    async def request(self, request: Request) -> Response:
        return await self.run(attempts(self.settings, request))

    async def run(self, steps: Steps[R]) -> R:
        stepper = Stepper(steps)
        async for item in self._drive(stepper):
            raise TypeError(f"{item!r} emitted outside an iteration")
        return stepper.value

    def iterate(self, steps: Steps[object]) -> AsyncGenerator[Any]:
        return self._drive(Stepper(steps))

    async def _drive(self, stepper: Stepper[Any]) -> AsyncGenerator[Any]:
        opened: list[Stream] = []
        try:
            while (op := stepper.op()) is not None:
                if isinstance(op, Emit):
                    yield op.item
                    continue
                try:
                    stepper.reply = await self._do(op, opened)
                except Exception as error:
                    stepper.error = error
        finally:
            for stream in opened:
                await stream.answer.aclose()

    async def _do(self, op: Op, opened: list[Stream]) -> Any:
        match op:
            case Call(request):
                return await self.request(request)
            case Send(prepared, content):
                body = _file_chunks_async(content) if isinstance(content, Path) else content
                return await self.client.send(build(self.client, prepared, body))
            case Sleep(seconds):
                await anyio.sleep(seconds)
            case Open(prepared, lines, timeout, deadline):
                # The deadline cancels whatever is under way: the connection, a read.
                with anyio.move_on_after(_left(deadline)):
                    answer = await self.client.send(
                        build(self.client, prepared, timeout=timeout), stream=True
                    )
                    stream = Stream(answer, answer.aiter_lines() if lines else answer.aiter_text(), deadline)
                    opened.append(stream)
                    if not answer.is_success:
                        await answer.aread()
                    return stream
                raise DeadlineError
            case Next(stream):
                if stream.deadline is None:
                    return await anext(stream.pieces, None)
                with anyio.move_on_after(_left(stream.deadline)):
                    return await anext(stream.pieces, None)
                raise DeadlineError
            case Close(stream):
                opened.remove(stream)
                await stream.answer.aclose()
            case Save(generation, folder):
                return await download_async(self.client, generation, folder, skip_existing=True)
            case Emit():
                raise TypeError("an Emit is the driver's")


def _left(deadline: float | None) -> float | None:
    """Seconds to a deadline, for a cancel scope (None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            yield chunk


async def _file_chunks_async(path: Path) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as file:
        while chunk := await file.read(_CHUNK):
            yield chunk


def _next(stream: Stream) -> str | None:
    try:
        piece: str | None = next(stream.pieces, None)
    except Exception:
        # Whatever a read on a socket shut down under it raises, the deadline is the cause.
        if stream.cut is not None and stream.cut.fired:
            raise DeadlineError from None
        raise
    return piece


def _close(stream: Stream) -> None:
    # The cut first: a connection handed back to the pool is never touched.
    if stream.cut is not None:
        stream.cut.stop()
    stream.answer.close()


class _DeadlineCut:
    """At the deadline, shuts down the socket of a stream being read, so that a read blocked until
    the next keep-alive returns at once (and the server sees the stream closed): a read's own
    timeout cannot do it, as each keep-alive starts the next read afresh. A transport without a
    socket (a custom ``http_client``) cannot be cut: the steps then see the deadline between pieces
    (a keep-alive at the latest)."""

    def __init__(self, deadline: float, answer: httpx.Response) -> None:
        stream: object = answer.extensions.get("network_stream")
        get_extra_info = getattr(stream, "get_extra_info", None)
        found: object = get_extra_info("socket") if callable(get_extra_info) else None
        self._socket = found if isinstance(found, socket.socket) else None
        self._lock = threading.Lock()
        self.fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._socket = None

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._socket is not None:
                # Already closed by the reader (its last read ended): nothing to wake.
                with contextlib.suppress(OSError):
                    self._socket.shutdown(socket.SHUT_RDWR)
