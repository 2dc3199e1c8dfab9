"""client.generations: create, get, wait, run, list, cancel, find by key, quote (sync and async)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from . import _requests as r
from ._events import events_async, events_sync
from ._http import AsyncHttp, SyncHttp
from ._pager import AsyncGenerationPager, GenerationPager, ListFilters
from ._sse import EventsState
from ._waiting import OnUpdate, wait_async, wait_sync
from .errors import ApiError
from .types import Generation, GenerationEvent, GenerationEventList, GenerationStatus, KeyedGeneration, Quote


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
        key = idempotency_key or r.new_idempotency_key()
        request = r.create_request(self._http.settings, r.request_body(body, fields), key, wait, cancel_after)
        return r.keyed(self._http.request(request).data, key)

    def get(self, generation_id: str) -> Generation:
        """GET /v1/generations/{id}: the whole generation."""
        return Generation.model_validate(self._http.request(r.get_request(generation_id)).data)

    def events(self, generation_id: str, *, last_event_id: int | None = None) -> Iterator[GenerationEvent]:
        """GET /v1/generations/{id}/events as Server-Sent Events: ``for event in events(id)`` gives each
        event as it happens, from the first (or after ``last_event_id``), and stops after the one that
        leaves the generation terminal. A dropped connection is reopened with Last-Event-ID: no event
        is lost or given twice."""
        return events_sync(self._http, EventsState(self._http.settings, generation_id, last_event_id))

    def event_log(self, generation_id: str, *, after: int | None = None) -> list[GenerationEvent]:
        """GET /v1/generations/{id}/events as JSON: the log so far, oldest first (after event ``after``)."""
        request = r.events_request(generation_id, after)
        return GenerationEventList.model_validate(self._http.request(request).data).data

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
        return wait_sync(self._http, generation, timeout, on_update, poll_interval, None, use_events)

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
        key = idempotency_key or r.new_idempotency_key()
        created = self.create(body, idempotency_key=key, cancel_after=cancel_after, **fields)
        try:
            done = wait_sync(self._http, created, timeout, on_update, poll_interval, key, use_events)
        except Exception as error:
            raise r.with_key(error, key) from None
        return r.finished(done, key)

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
        return GenerationPager(self._http, ListFilters(status, model, limit, cursor, idempotency_key))

    def cancel(self, generation_id: str) -> Generation:
        """POST /v1/generations/{id}/cancel: failed with ``canceled`` and refunded; NotCancelableError
        when too late."""
        try:
            return Generation.model_validate(self._http.request(r.cancel_request(generation_id)).data)
        except ApiError as error:
            r.route_missing(error, "POST /v1/generations/{id}/cancel")

    def find_by_idempotency_key(self, key: str) -> Generation | None:
        """The generation an Idempotency-Key made (in this API key's namespace), or None."""
        page = self.list(idempotency_key=key, limit=1).first_page()
        if not page.data:
            return None
        # An API without the filter ignores it and lists the newest generation: a key that cannot
        # exist must then list nothing, or the answer above means nothing.
        probe = self.list(idempotency_key=f"probe-{r.new_idempotency_key()}", limit=1).first_page()
        if probe.data:
            raise r.filter_ignored()
        return page.data[0]

    def quote(self, body: r.Body = None, /, **fields: Any) -> Quote:
        """POST /v1/generations/quote: the price of this body and whether the balance covers it."""
        try:
            answer = self._http.request(r.quote_request(r.request_body(body, fields)))
        except ApiError as error:
            r.route_missing(error, "POST /v1/generations/quote")
        return Quote.model_validate(answer.data)


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
        key = idempotency_key or r.new_idempotency_key()
        request = r.create_request(self._http.settings, r.request_body(body, fields), key, wait, cancel_after)
        return r.keyed((await self._http.request(request)).data, key)

    async def get(self, generation_id: str) -> Generation:
        return Generation.model_validate((await self._http.request(r.get_request(generation_id))).data)

    def events(
        self, generation_id: str, *, last_event_id: int | None = None
    ) -> AsyncIterator[GenerationEvent]:
        """``async for event in events(id)``: as Generations.events. Leaving the loop early closes the
        connection when the iterator is collected; ``contextlib.aclosing`` closes it at once."""
        return events_async(self._http, EventsState(self._http.settings, generation_id, last_event_id))

    async def event_log(self, generation_id: str, *, after: int | None = None) -> list[GenerationEvent]:
        request = r.events_request(generation_id, after)
        return GenerationEventList.model_validate((await self._http.request(request)).data).data

    async def wait(
        self,
        generation: str | Generation,
        *,
        timeout: float | None = None,
        on_update: OnUpdate | None = None,
        poll_interval: float = 2.0,
        use_events: bool | None = None,
    ) -> Generation:
        return await wait_async(self._http, generation, timeout, on_update, poll_interval, None, use_events)

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
        key = idempotency_key or r.new_idempotency_key()
        created = await self.create(body, idempotency_key=key, cancel_after=cancel_after, **fields)
        try:
            done = await wait_async(self._http, created, timeout, on_update, poll_interval, key, use_events)
        except Exception as error:
            raise r.with_key(error, key) from None
        return r.finished(done, key)

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
        return AsyncGenerationPager(self._http, ListFilters(status, model, limit, cursor, idempotency_key))

    async def cancel(self, generation_id: str) -> Generation:
        try:
            answer = await self._http.request(r.cancel_request(generation_id))
        except ApiError as error:
            r.route_missing(error, "POST /v1/generations/{id}/cancel")
        return Generation.model_validate(answer.data)

    async def find_by_idempotency_key(self, key: str) -> Generation | None:
        page = await self.list(idempotency_key=key, limit=1).first_page()
        if not page.data:
            return None
        probe = await self.list(idempotency_key=f"probe-{r.new_idempotency_key()}", limit=1).first_page()
        if probe.data:
            raise r.filter_ignored()
        return page.data[0]

    async def quote(self, body: r.Body = None, /, **fields: Any) -> Quote:
        try:
            answer = await self._http.request(r.quote_request(r.request_body(body, fields)))
        except ApiError as error:
            r.route_missing(error, "POST /v1/generations/quote")
        return Quote.model_validate(answer.data)
