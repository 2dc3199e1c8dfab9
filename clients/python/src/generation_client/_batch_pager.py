"""Lists of batches, newest first: iterating a pager walks every page, fetching each only when the
previous one is used up (as the generations' pager)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from ._core import Request
from ._http import AsyncHttp, SyncHttp
from .types import Batch, BatchList


def _request(limit: int | None, cursor: str | None) -> Request:
    query: Mapping[str, str | int | None] = {"limit": limit, "cursor": cursor}
    return Request("GET", "/batches", query=query)


@dataclass(frozen=True)
class BatchPage:
    """One page, and the way to the next."""

    data: list[Batch]
    next_cursor: str | None
    _next: Callable[[str], BatchPage]

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def next_page(self) -> BatchPage | None:
        return None if self.next_cursor is None else self._next(self.next_cursor)


@dataclass(frozen=True)
class AsyncBatchPage:
    data: list[Batch]
    next_cursor: str | None
    _next: Callable[[str], Awaitable[AsyncBatchPage]]

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    async def next_page(self) -> AsyncBatchPage | None:
        return None if self.next_cursor is None else await self._next(self.next_cursor)


class BatchPager:
    """``for batch in client.batches.list():`` walks every page; ``first_page()`` and ``pages()``
    give the pages."""

    def __init__(self, http: SyncHttp, limit: int | None, cursor: str | None) -> None:
        self._http = http
        self._limit = limit
        self._cursor = cursor

    def first_page(self) -> BatchPage:
        return self._page(self._cursor)

    def pages(self) -> Iterator[BatchPage]:
        page: BatchPage | None = self.first_page()
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[Batch]:
        for page in self.pages():
            yield from page.data

    def _page(self, cursor: str | None) -> BatchPage:
        body = BatchList.model_validate(self._http.request(_request(self._limit, cursor)).data)
        return BatchPage(body.data, body.next_cursor, self._page)


class AsyncBatchPager:
    """``async for batch in client.batches.list():`` walks every page."""

    def __init__(self, http: AsyncHttp, limit: int | None, cursor: str | None) -> None:
        self._http = http
        self._limit = limit
        self._cursor = cursor

    async def first_page(self) -> AsyncBatchPage:
        return await self._page(self._cursor)

    async def pages(self) -> AsyncIterator[AsyncBatchPage]:
        page: AsyncBatchPage | None = await self.first_page()
        while page is not None:
            yield page
            page = await page.next_page()

    async def __aiter__(self) -> AsyncIterator[Batch]:
        async for page in self.pages():
            for batch in page.data:
                yield batch

    async def _page(self, cursor: str | None) -> AsyncBatchPage:
        body = BatchList.model_validate((await self._http.request(_request(self._limit, cursor))).data)
        return AsyncBatchPage(body.data, body.next_cursor, self._page)
