"""Following a list RPC's page tokens, up to a limit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# fetch(page_size, page_token) -> (items, next_page_token); "" ends the listing.
Fetch = Callable[[int, str], tuple[Sequence[T], str]]


def collect_from(
    fetch: Fetch[T],
    *,
    page_size: int,
    limit: int = 0,
    token: str = "",
    keep: Callable[[T], bool] | None = None,
) -> tuple[list[T], str]:
    """Items across pages from `token` on that `keep` keeps (default all), at most `limit` (0: all), and
    the token that continues after the last of them ("" when nothing is left). A page never asks for more
    than the limit leaves, so even with `keep` no item is fetched past the last one returned: the
    server's token then points exactly past it."""
    items: list[T] = []
    while True:
        size = page_size if not limit else min(page_size, limit - len(items))
        page, token = fetch(size, token)
        items.extend(page if keep is None else [item for item in page if keep(item)])
        if limit and len(items) >= limit:
            return items[:limit], token
        # An empty page with a token would loop forever on a misbehaving server; treat it as the end.
        if not token or not page:
            return items, ""


def collect(fetch: Fetch[T], *, page_size: int, limit: int = 0) -> tuple[list[T], bool]:
    """Items across pages, at most `limit` (0: all); the flag says whether more were left behind."""
    items, token = collect_from(fetch, page_size=page_size, limit=limit)
    return items, bool(token)
