"""Paging of list commands: following a list RPC's page tokens up to a limit, continue tokens for
listings the CLI reads itself, and the one line that says how to go on."""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

import typer

from suanli.cli.output import note

T = TypeVar("T")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

# fetch(page_size, page_token) -> (items, next_page_token); "" ends the listing.
Fetch = Callable[[int, str], tuple[Sequence[T], str]]


def collect_from(
    fetch: Fetch[T],
    *,
    page_size: int,
    limit: int = 0,
    token: str = "",
    keep: Callable[[T], bool] | None = None,
    until: Callable[[T], bool] | None = None,
) -> tuple[list[T], str]:
    """Items across pages from `token` on that `keep` keeps (default all), at most `limit` (0: all), and
    the token that continues after the last of them ("" when nothing is left). A page never asks for more
    than the limit leaves, so even with `keep` no item is fetched past the last one returned: the
    server's token then points exactly past it. The first item `until` is true of ends the listing:
    neither it nor any after it is wanted (a time bound on an ordered listing)."""
    items: list[T] = []
    while True:
        size = page_size if not limit else min(page_size, limit - len(items))
        page, token = fetch(size, token)
        if until is not None and any(until(item) for item in page):
            page = list(itertools.takewhile(lambda item: not until(item), page))
            token = ""
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


# A listing's own continue token, for commands that read their rows themselves (PostgreSQL, a topic): the
# sort key of the last row shown. Keys compare newest first, so a resumed listing starts strictly past
# that row, and rows that arrived meanwhile (newer ones, keys above it) neither shift nor repeat it.
Key = tuple[int | str, ...]

ContinueOption = Annotated[
    str,
    typer.Option(
        "--continue",
        metavar="TOKEN",
        help="Go on where a listing stopped (the token it printed), with the same filters.",
        show_default=False,
    ),
]


def more(shown: int, token: str) -> None:
    """When a listing stopped with rows left, say on stderr how to go on."""
    if token:
        note(f"(first {shown} shown; --continue {token} for more, --limit 0 lists all)")


def micros(at: datetime) -> int:
    """An instant as a key part: whole microseconds, exact, so equal times compare equal."""
    return (at - EPOCH) // MICROSECOND


def instant(micros: int) -> datetime:
    """The instant of a key part `micros` made."""
    return EPOCH + micros * MICROSECOND


def cursor(key: Key) -> str:
    """The opaque token of a row's key."""
    return base64.urlsafe_b64encode(json.dumps(list(key), separators=(",", ":")).encode()).decode()


def cursor_key(token: str, like: Key | None) -> Key:
    """The key in ``token``, checked part by part against the types of ``like`` (a key of this listing,
    None when it has no rows left); a token from elsewhere is a usage error (exit 2), not a traceback or
    a silently wrong page."""
    try:
        key = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error):
        key = None
    kinds = None if like is None else [type(k) for k in like]
    if not isinstance(key, list) or not key or (kinds is not None and [type(k) for k in key] != kinds):
        from suanli.cli.client import EXIT_USAGE, Failure, fail

        raise fail(Failure(f"--continue {token!r}: not a token this listing printed", EXIT_USAGE))
    return tuple(key)


def newest_first(
    items: Iterable[T], key: Callable[[T], Key], *, limit: int = 0, token: str = ""
) -> tuple[list[T], str]:
    """``items`` newest first (by ``key``, descending; keys are unique), from past ``token``'s row on, at
    most ``limit`` (0: all), and the token that continues after the last of them ("" when none is left)."""
    ordered = sorted(items, key=key, reverse=True)
    if token:
        after = cursor_key(token, key(ordered[0]) if ordered else None)
        ordered = [item for item in ordered if key(item) < after]
    if not limit or len(ordered) <= limit:
        return ordered, ""
    return ordered[:limit], cursor(key(ordered[limit - 1]))
