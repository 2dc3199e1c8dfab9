"""Lists, newest first (generations, batches): iterating a pager walks every page, fetching each only
when the previous one is used up; ``first_page()`` and ``pages()`` give the pages. One pager for
every list: what a list asks for a page and how its answer reads are the pager's arguments, and
the walk is steps (``_steps``) that both clients' pagers hand to their driver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ._core import Request
from ._http import AsyncHttp, SyncHttp
from ._steps import Emit, Steps, fetch
from .types import Batch, Generation

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ListBody(Protocol[T_co]):
    """One page as the API answers it (GenerationList, BatchList)."""

    @property
    def data(self) -> Sequence[T_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


@dataclass(frozen=True)
class Listing(Generic[T]):
    """A list, without I/O: the request for the page after a cursor, how its answer reads, and the
    cursor its first page comes after (None: the newest first)."""

    request: Callable[[str | None], Request]
    parse: Callable[[Any], ListBody[T]]
    cursor: str | None = None

    def page(self, cursor: str | None) -> Steps[ListBody[T]]:
        return (yield from fetch(self.request(cursor), self.parse))

    def items(self) -> Steps[None]:
        """Every item, page after page, each page asked for once the last is used up."""
        cursor = self.cursor
        while True:
            body = yield from self.page(cursor)
            for item in body.data:
                yield Emit(item)
            if body.next_cursor is None:
                return
            cursor = body.next_cursor


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page, and the way to the next."""

    data: list[T]
    next_cursor: str | None
    _next: Callable[[str], Page[T]]

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def next_page(self) -> Page[T] | None:
        return None if self.next_cursor is None else self._next(self.next_cursor)


@dataclass(frozen=True)
class AsyncPage(Generic[T]):
    data: list[T]
    next_cursor: str | None
    _next: Callable[[str], Awaitable[AsyncPage[T]]]

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    async def next_page(self) -> AsyncPage[T] | None:
        return None if self.next_cursor is None else await self._next(self.next_cursor)


class Pager(Generic[T]):
    """``for item in client.generations.list():`` (or ``batches.list()``) walks every page;
    ``first_page()`` and ``pages()`` give the pages."""

    def __init__(self, http: SyncHttp, listing: Listing[T]) -> None:
        self._http = http
        self._listing = listing

    def first_page(self) -> Page[T]:
        return self._page(self._listing.cursor)

    def pages(self) -> Iterator[Page[T]]:
        page: Page[T] | None = self.first_page()
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[T]:
        return self._http.iterate(self._listing.items())

    def _page(self, cursor: str | None) -> Page[T]:
        body = self._http.run(self._listing.page(cursor))
        return Page(list(body.data), body.next_cursor, self._page)


class AsyncPager(Generic[T]):
    """``async for item in client.generations.list():`` walks every page."""

    def __init__(self, http: AsyncHttp, listing: Listing[T]) -> None:
        self._http = http
        self._listing = listing

    async def first_page(self) -> AsyncPage[T]:
        return await self._page(self._listing.cursor)

    async def pages(self) -> AsyncIterator[AsyncPage[T]]:
        page: AsyncPage[T] | None = await self.first_page()
        while page is not None:
            yield page
            page = await page.next_page()

    def __aiter__(self) -> AsyncIterator[T]:
        return self._http.iterate(self._listing.items())

    async def _page(self, cursor: str | None) -> AsyncPage[T]:
        body = await self._http.run(self._listing.page(cursor))
        return AsyncPage(list(body.data), body.next_cursor, self._page)


# The names each list's pager and pages had before there was one pager.
GenerationPager = Pager[Generation]
AsyncGenerationPager = AsyncPager[Generation]
BatchPager = Pager[Batch]
AsyncBatchPager = AsyncPager[Batch]
BatchPage = Page[Batch]
AsyncBatchPage = AsyncPage[Batch]
