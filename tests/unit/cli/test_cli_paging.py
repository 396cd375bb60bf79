"""Page-token following for list commands."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from suanli.cli.paging import collect


class Pages:
    """A listing of `total` numbers served `page_size` at a time, recording what was asked."""

    def __init__(self, total: int) -> None:
        self.items = list(range(total))
        self.requests: list[tuple[int, str]] = []

    def __call__(self, size: int, token: str) -> tuple[Sequence[int], str]:
        self.requests.append((size, token))
        start = int(token or 0)
        end = min(start + size, len(self.items))
        return self.items[start:end], str(end) if end < len(self.items) else ""


@pytest.mark.parametrize(
    ("total", "limit", "expected", "more", "sizes"),
    [
        (250, 0, 250, False, [100, 100, 100]),
        (250, 120, 120, True, [100, 20]),
        (250, 250, 250, False, [100, 100, 50]),
        (250, 300, 250, False, [100, 100, 100]),
        (0, 0, 0, False, [100]),
        (100, 100, 100, False, [100]),
        (101, 100, 100, True, [100]),
    ],
)
def test_collect(total: int, limit: int, expected: int, more: bool, sizes: list[int]) -> None:
    pages = Pages(total)
    items, left = collect(pages, page_size=100, limit=limit)
    assert items == list(range(expected))
    assert left is more
    assert [size for size, _ in pages.requests] == sizes
    assert [token for _, token in pages.requests] == ["", *(str(100 * i) for i in range(1, len(sizes)))]


def test_an_empty_page_with_a_token_ends_the_listing() -> None:
    assert collect(lambda size, token: ([], "again"), page_size=10) == ([], False)
