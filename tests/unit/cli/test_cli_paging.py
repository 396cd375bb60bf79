"""Page-token following for list commands."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import typer

from suanli.cli.paging import collect, collect_from, cursor, newest_first


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


def test_kept_items_stop_exactly_at_the_limit_so_the_token_continues_after_them() -> None:
    pages = Pages(30)
    evens, token = collect_from(pages, page_size=10, limit=4, keep=lambda n: n % 2 == 0)
    assert evens == [0, 2, 4, 6]
    # each page asked only for what the limit left, so nothing past 6 was fetched and skipped
    assert [size for size, _ in pages.requests] == [4, 2, 1]
    rest, end = collect_from(pages, page_size=10, token=token, keep=lambda n: n % 2 == 0)
    assert rest == list(range(8, 30, 2)) and end == ""


def test_collect_from_goes_on_from_a_token() -> None:
    assert collect_from(Pages(5), page_size=2, token="3") == ([3, 4], "")
    assert collect_from(Pages(5), page_size=2, limit=2) == ([0, 1], "2")


def test_newest_first_pages_resume_strictly_after_the_last_row_even_when_newer_rows_arrive() -> None:
    rows = [(n % 3, f"r{n}") for n in range(10)]  # ties on the first part, told apart by the second

    def key(row: tuple[int, str]) -> tuple[int, str]:
        return row

    first, token = newest_first(rows, key, limit=4)
    assert first == sorted(rows, reverse=True)[:4] and token
    rest, end = newest_first([*rows, (9, "new")], key, token=token)
    assert first + rest == sorted(rows, reverse=True) and end == ""
    assert newest_first([], key, token=token) == ([], "")


@pytest.mark.parametrize("token", ["garbage", cursor(("a", 1)), cursor((1,))])
def test_a_token_of_another_listing_is_a_usage_error(token: str) -> None:
    with pytest.raises(typer.Exit) as exited:
        newest_first([(1, "a")], lambda row: row, token=token)
    assert exited.value.exit_code == 2


def test_until_ends_the_listing_at_the_first_item_past_the_bound() -> None:
    pages = Pages(30)
    items, token = collect_from(pages, page_size=10, until=lambda n: n >= 14)
    assert items == list(range(14)) and token == ""
    assert len(pages.requests) == 2  # nothing fetched past the bound's page
