"""Paging checks every list command's tests share: follow the --continue hints a listing prints to its
end, and the rows come out once each, newest first, in pages of --limit (docs/cli.md, "Paging")."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from click.testing import Result

HINT = re.compile(r"\(first (\d+) shown; --continue (\S+) for more, --limit 0 lists all\)")
GARBAGE = "not-a-token"

# run(extra arguments) -> the command's result; parse(stdout) -> its rows.
Run = Callable[[Sequence[str]], Result]
Parse = Callable[[str], list[Any]]


def follow(run: Run, parse: Parse, limit: int) -> list[list[Any]]:
    """The pages of a listing at ``--limit limit``, from the first to the one without a hint."""
    pages: list[list[Any]] = []
    extra: list[str] = []
    while True:
        result = run(["--limit", str(limit), *extra])
        assert result.exit_code == 0, result.output
        pages.append(parse(result.stdout))
        hint = HINT.search(result.stderr)
        if hint is None:
            return pages
        assert int(hint[1]) == len(pages[-1]) == limit, result.stderr
        extra = ["--continue", hint[2]]


def assert_pages(pages: list[list[Any]], everything: list[Any], newest: Callable[[Any], Any]) -> None:
    """Pages that, joined, are every row once, in the order of the unpaged listing, newest first."""
    joined = [row for page in pages for row in page]
    assert joined == everything
    assert len(set(map(repr, joined))) == len(joined)
    assert [newest(row) for row in joined] == sorted((newest(row) for row in joined), reverse=True)


def assert_refuses_garbage(run: Run) -> None:
    """A token no listing printed: one line on stderr, exit 2."""
    result = run(["--continue", GARBAGE])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: --continue {GARBAGE!r}: not a token this listing printed"
    ]
