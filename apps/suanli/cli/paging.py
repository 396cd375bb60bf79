"""Following a list RPC's page tokens, up to a limit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# fetch(page_size, page_token) -> (items, next_page_token); "" ends the listing.
Fetch = Callable[[int, str], tuple[Sequence[T], str]]


def collect(fetch: Fetch[T], *, page_size: int, limit: int = 0) -> tuple[list[T], bool]:
    """Items across pages, at most `limit` (0: all); the flag says whether more were left behind."""
    items: list[T] = []
    token = ""
    while True:
        size = page_size if not limit else min(page_size, limit - len(items))
        page, token = fetch(size, token)
        items.extend(page)
        if limit and len(items) >= limit:
            return items[:limit], bool(token) or len(items) > limit
        # An empty page with a token would loop forever on a misbehaving server; treat it as the end.
        if not token or not page:
            return items, False
