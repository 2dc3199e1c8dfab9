"""Lists of generations, newest first: iterating a pager walks every page, fetching each only when
the previous one is used up."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ._core import Request
from ._http import AsyncHttp, SyncHttp
from .types import Generation, GenerationList, GenerationStatus


@dataclass(frozen=True)
class ListFilters:
    #: One status or several (sent comma-separated).
    status: GenerationStatus | Sequence[GenerationStatus] | None = None
    model: str | None = None
    #: Page size, 1 to 100 (the API's default: 20).
    limit: int | None = None
    #: Start after this cursor (a page's next_cursor).
    cursor: str | None = None
    #: Only the generation this Idempotency-Key made.
    idempotency_key: str | None = None

    def request(self, cursor: str | None) -> Request:
        status = self.status if isinstance(self.status, str) or self.status is None else ",".join(self.status)
        query: Mapping[str, str | int | None] = {
            "limit": self.limit,
            "cursor": cursor,
            "status": status,
            "model": self.model,
            "idempotency_key": self.idempotency_key,
        }
        return Request("GET", "/generations", query=query)


@dataclass(frozen=True)
class Page:
    """One page, and the way to the next."""

    data: list[Generation]
    next_cursor: str | None
    _next: Callable[[str], Page]

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def next_page(self) -> Page | None:
        return None if self.next_cursor is None else self._next(self.next_cursor)


@dataclass(frozen=True)
class AsyncPage:
    data: list[Generation]
    next_cursor: str | None
    _next: Callable[[str], Awaitable[AsyncPage]]

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    async def next_page(self) -> AsyncPage | None:
        return None if self.next_cursor is None else await self._next(self.next_cursor)


class GenerationPager:
    """``for generation in client.generations.list():`` walks every page; ``first_page()`` and
    ``pages()`` give the pages."""

    def __init__(self, http: SyncHttp, filters: ListFilters) -> None:
        self._http = http
        self._filters = filters

    def first_page(self) -> Page:
        return self._page(self._filters.cursor)

    def pages(self) -> Iterator[Page]:
        page: Page | None = self.first_page()
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[Generation]:
        for page in self.pages():
            yield from page.data

    def _page(self, cursor: str | None) -> Page:
        body = GenerationList.model_validate(self._http.request(self._filters.request(cursor)).data)
        return Page(body.data, body.next_cursor, self._page)


class AsyncGenerationPager:
    """``async for generation in client.generations.list():`` walks every page."""

    def __init__(self, http: AsyncHttp, filters: ListFilters) -> None:
        self._http = http
        self._filters = filters

    async def first_page(self) -> AsyncPage:
        return await self._page(self._filters.cursor)

    async def pages(self) -> AsyncIterator[AsyncPage]:
        page: AsyncPage | None = await self.first_page()
        while page is not None:
            yield page
            page = await page.next_page()

    async def __aiter__(self) -> AsyncIterator[Generation]:
        async for page in self.pages():
            for generation in page.data:
                yield generation

    async def _page(self, cursor: str | None) -> AsyncPage:
        answer = await self._http.request(self._filters.request(cursor))
        body = GenerationList.model_validate(answer.data)
        return AsyncPage(body.data, body.next_cursor, self._page)
