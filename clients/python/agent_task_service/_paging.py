"""Auto-paging iterators: iterate items across pages; `pages()` gives the page objects."""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Iterator, List, Optional, TypeVar

T = TypeVar("T")
P = TypeVar("P")


class Pager(Generic[T, P]):
    """Items of a list across all its pages; each page is fetched when the previous one is used up."""

    def __init__(self, fetch: Callable[[Optional[Any]], P], items: Callable[[P], List[T]], next_cursor: Callable[[P], Optional[Any]]) -> None:
        self._fetch = fetch
        self._items = items
        self._next = next_cursor

    def pages(self) -> Iterator[P]:
        """Each page of the list, in order."""
        cursor: Optional[Any] = None
        while True:
            page = self._fetch(cursor)
            yield page
            cursor = self._next(page)
            if cursor is None:
                return

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from self._items(page)


class AsyncPager(Generic[T, P]):
    """Items of a list across all its pages, for `async for`."""

    def __init__(
        self,
        fetch: Callable[[Optional[Any]], Awaitable[P]],
        items: Callable[[P], List[T]],
        next_cursor: Callable[[P], Optional[Any]],
    ) -> None:
        self._fetch = fetch
        self._items = items
        self._next = next_cursor

    async def pages(self) -> AsyncIterator[P]:
        """Each page of the list, in order."""
        cursor: Optional[Any] = None
        while True:
            page = await self._fetch(cursor)
            yield page
            cursor = self._next(page)
            if cursor is None:
                return

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.pages():
            for item in self._items(page):
                yield item


def next_cursor(page: Any) -> Optional[str]:
    """The cursor of the page after a `{items, nextCursor, hasMore}` page, None at the end."""
    return page.next_cursor if page.has_more and page.next_cursor else None


def next_after(page: Any) -> Optional[int]:
    """The `after` of the page after a `{…, nextAfter, hasMore}` page (steps, events), None at the end."""
    return page.next_after if page.has_more else None
