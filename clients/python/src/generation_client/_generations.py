"""client.generations: create, get, wait, run, list, cancel, find by key, quote (sync and async). Each
method hands its steps (``_generation_steps``) to the client's driver: the twins differ only in that."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from . import _generation_steps as g
from . import _requests as r
from . import _waiting
from ._events import events
from ._http import AsyncHttp, SyncHttp
from ._pager import AsyncGenerationPager, AsyncPager, GenerationPager, Pager
from ._sse import EventsState
from ._wait_state import OnUpdate
from .types import Generation, GenerationEvent, GenerationStatus, KeyedGeneration, Quote


class Generations:
    def __init__(self, http: SyncHttp) -> None:
        self._http = http

    def create(
        self,
        body: r.Body = None,
        /,
        *,
        idempotency_key: str | None = None,
        wait: int | None = None,
        cancel_after: int | str | None = None,
        **fields: Any,
    ) -> KeyedGeneration:
        """POST /v1/generations. The Idempotency-Key is made once, before the first attempt, and every
        retry sends it with the same body bytes: a retried create never makes or charges a second
        generation. The key is on the result (``idempotency_key``) and on every error raised."""
        settings = self._http.settings
        return self._http.run(g.create(settings, body, fields, idempotency_key, wait, cancel_after))

    def get(self, generation_id: str) -> Generation:
        """GET /v1/generations/{id}: the whole generation."""
        return self._http.run(g.get(generation_id))

    def events(self, generation_id: str, *, last_event_id: int | None = None) -> Iterator[GenerationEvent]:
        """GET /v1/generations/{id}/events as Server-Sent Events: ``for event in events(id)`` gives each
        event as it happens, from the first (or after ``last_event_id``), and stops after the one that
        leaves the generation terminal. A dropped connection is reopened with Last-Event-ID: no event
        is lost or given twice."""
        return self._http.iterate(events(EventsState(self._http.settings, generation_id, last_event_id)))

    def event_log(self, generation_id: str, *, after: int | None = None) -> list[GenerationEvent]:
        """GET /v1/generations/{id}/events as JSON: the log so far, oldest first (after event ``after``)."""
        return self._http.run(g.event_log(generation_id, after))

    def wait(
        self,
        generation: str | Generation,
        *,
        timeout: float | None = None,
        on_update: OnUpdate | None = None,
        poll_interval: float = 2.0,
        use_events: bool | None = None,
    ) -> Generation:
        """The generation once it is succeeded, failed or rejected (not raised: see run). WaitTimeoutError
        after ``timeout`` seconds (default 15 minutes); the generation goes on, wait(id) resumes.
        ``use_events``: wait on the event stream rather than held GETs; by default when ``timeout`` is
        longer than one held request (50 s). An API without the stream gets held GETs all the same."""
        settings = self._http.settings
        return self._http.run(
            _waiting.wait(settings, generation, timeout, on_update, poll_interval, None, use_events)
        )

    def run(
        self,
        body: r.Body = None,
        /,
        *,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        on_update: OnUpdate | None = None,
        poll_interval: float = 2.0,
        use_events: bool | None = None,
        cancel_after: int | str | None = None,
        **fields: Any,
    ) -> KeyedGeneration:
        """create + wait: the succeeded generation, or GenerationFailedError / GenerationRejectedError,
        or WaitTimeoutError (the job goes on)."""
        options = (idempotency_key, timeout, on_update, poll_interval, use_events, cancel_after)
        return self._http.run(g.run(self._http.settings, body, fields, *options))

    def list(
        self,
        *,
        status: GenerationStatus | list[GenerationStatus] | None = None,
        model: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        idempotency_key: str | None = None,
    ) -> GenerationPager:
        """GET /v1/generations, newest first: iterating walks every page."""
        filters = r.ListFilters(status, model, limit, cursor, idempotency_key)
        return Pager(self._http, g.listing(filters))

    def cancel(self, generation_id: str) -> Generation:
        """POST /v1/generations/{id}/cancel: failed with ``canceled`` and refunded; NotCancelableError
        when too late."""
        return self._http.run(g.cancel(generation_id))

    def find_by_idempotency_key(self, key: str) -> Generation | None:
        """The generation an Idempotency-Key made (in this API key's namespace), or None."""
        return self._http.run(g.find_by_idempotency_key(key))

    def quote(self, body: r.Body = None, /, **fields: Any) -> Quote:
        """POST /v1/generations/quote: the price of this body and whether the balance covers it."""
        return self._http.run(g.quote(body, fields))


class AsyncGenerations:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def create(
        self,
        body: r.Body = None,
        /,
        *,
        idempotency_key: str | None = None,
        wait: int | None = None,
        cancel_after: int | str | None = None,
        **fields: Any,
    ) -> KeyedGeneration:
        """As Generations.create: one key per call, reused on every retry."""
        settings = self._http.settings
        return await self._http.run(g.create(settings, body, fields, idempotency_key, wait, cancel_after))

    async def get(self, generation_id: str) -> Generation:
        return await self._http.run(g.get(generation_id))

    def events(
        self, generation_id: str, *, last_event_id: int | None = None
    ) -> AsyncIterator[GenerationEvent]:
        """``async for event in events(id)``: as Generations.events. Leaving the loop early closes the
        connection when the iterator is collected; ``contextlib.aclosing`` closes it at once."""
        return self._http.iterate(events(EventsState(self._http.settings, generation_id, last_event_id)))

    async def event_log(self, generation_id: str, *, after: int | None = None) -> list[GenerationEvent]:
        return await self._http.run(g.event_log(generation_id, after))

    async def wait(
        self,
        generation: str | Generation,
        *,
        timeout: float | None = None,
        on_update: OnUpdate | None = None,
        poll_interval: float = 2.0,
        use_events: bool | None = None,
    ) -> Generation:
        settings = self._http.settings
        return await self._http.run(
            _waiting.wait(settings, generation, timeout, on_update, poll_interval, None, use_events)
        )

    async def run(
        self,
        body: r.Body = None,
        /,
        *,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        on_update: OnUpdate | None = None,
        poll_interval: float = 2.0,
        use_events: bool | None = None,
        cancel_after: int | str | None = None,
        **fields: Any,
    ) -> KeyedGeneration:
        options = (idempotency_key, timeout, on_update, poll_interval, use_events, cancel_after)
        return await self._http.run(g.run(self._http.settings, body, fields, *options))

    def list(
        self,
        *,
        status: GenerationStatus | list[GenerationStatus] | None = None,
        model: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncGenerationPager:
        """``async for g in client.generations.list()`` walks every page."""
        filters = r.ListFilters(status, model, limit, cursor, idempotency_key)
        return AsyncPager(self._http, g.listing(filters))

    async def cancel(self, generation_id: str) -> Generation:
        return await self._http.run(g.cancel(generation_id))

    async def find_by_idempotency_key(self, key: str) -> Generation | None:
        return await self._http.run(g.find_by_idempotency_key(key))

    async def quote(self, body: r.Body = None, /, **fields: Any) -> Quote:
        return await self._http.run(g.quote(body, fields))
