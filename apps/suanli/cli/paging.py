"""Following a list RPC's page tokens, up to a limit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# fetch(page_size, page_token) -> (items, next_page_token); "" ends the listing.
Fetch = Callable[[int, str], tuple[Sequence[T], str]]


def collect_from(fetch: Fetch[T], *, page_size: int, limit: int = 0, token: str = "") -> tuple[list[T], str]:
    """Items across pages from `token` on, at most `limit` (0: all), and the token that continues after
    the last of them ("" when nothing is left): the last page asks for just what the limit leaves, so
    the server's token points exactly past the items returned."""
    items: list[T] = []
    while True:
        size = page_size if not limit else min(page_size, limit - len(items))
        page, token = fetch(size, token)
        items.extend(page)
        if limit and len(items) >= limit:
            return items[:limit], token
        # An empty page with a token would loop forever on a misbehaving server; treat it as the end.
        if not token or not page:
            return items, ""


def collect(fetch: Fetch[T], *, page_size: int, limit: int = 0) -> tuple[list[T], bool]:
    """Items across pages, at most `limit` (0: all); the flag says whether more were left behind."""
    items, token = collect_from(fetch, page_size=page_size, limit=limit)
    return items, bool(token)
