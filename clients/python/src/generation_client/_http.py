"""The cores every resource goes through: one request with the retry policy, errors as classes.

The sync and async cores are the same loop around ``_core``'s shared steps; only the I/O differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import httpx

from ._core import Request, Response, Settings, outcome, prepare, retry_delay, transport_error
from .errors import ApiError
from .retry_policy import RetryEvent

OnRetry = Callable[[RetryEvent], None]


def retry_event(request: Request, attempt: int, delay: float, failure: Exception) -> RetryEvent:
    return RetryEvent(
        method=request.method,
        path=request.path,
        attempt=attempt + 1,
        delay=delay,
        status=failure.status if isinstance(failure, ApiError) else None,
        error=failure,
        idempotency_key=request.idempotency_key,
    )


class SyncHttp:
    def __init__(self, settings: Settings, client: httpx.Client, on_retry: OnRetry | None) -> None:
        self.settings = settings
        self.client = client
        self.on_retry = on_retry

    def request(self, request: Request) -> Response:
        prepared = prepare(self.settings, request)
        attempt = 0
        while True:
            try:
                answer = self.client.request(
                    prepared.method,
                    prepared.url,
                    params=prepared.params,
                    headers=prepared.headers,
                    content=request.upload() if request.upload else prepared.content,
                    timeout=prepared.timeout,
                )
                result = outcome(request, answer)
            except httpx.TransportError as error:
                result = transport_error(request, prepared, error)
            if isinstance(result, Response):
                return result
            delay = retry_delay(result, attempt, self.settings.max_retries)
            if delay is None:
                raise result
            if self.on_retry:
                self.on_retry(retry_event(request, attempt, delay, result))
            time.sleep(delay)
            attempt += 1


class AsyncHttp:
    def __init__(self, settings: Settings, client: httpx.AsyncClient, on_retry: OnRetry | None) -> None:
        self.settings = settings
        self.client = client
        self.on_retry = on_retry

    async def request(self, request: Request) -> Response:
        prepared = prepare(self.settings, request)
        attempt = 0
        while True:
            try:
                answer = await self.client.request(
                    prepared.method,
                    prepared.url,
                    params=prepared.params,
                    headers=prepared.headers,
                    content=request.upload() if request.upload else prepared.content,
                    timeout=prepared.timeout,
                )
                result = outcome(request, answer)
            except httpx.TransportError as error:
                result = transport_error(request, prepared, error)
            if isinstance(result, Response):
                return result
            delay = retry_delay(result, attempt, self.settings.max_retries)
            if delay is None:
                raise result
            if self.on_retry:
                self.on_retry(retry_event(request, attempt, delay, result))
            await anyio.sleep(delay)
            attempt += 1
