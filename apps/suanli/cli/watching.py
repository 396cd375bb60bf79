"""`--watch` on list commands, as `kubectl get --watch` does it: the list once, then every row that
appears or changes, until Ctrl-C (docs/cli.md, "Output").

The scheduler's list RPCs are polled (every `--interval` seconds) rather than streamed: a list is
already paged and filtered server-side, and a changed row is what a person watching wants to see, so
re-listing and printing the difference is both simple and what the answer means. Rows that vanish
(a job pruned from the list's page, a node removed) are not printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Annotated, Any

import typer

from suanli.cli.output import Output, Rows, emit_rows, plain_text, sorted_rows, unique_items

WatchOption = Annotated[
    bool,
    typer.Option(
        "--watch",
        "-w",
        help="After the list, print each row that appears or changes (polling every --interval "
        "seconds) until Ctrl-C; -o json/yaml print one document per change.",
    ),
]
IntervalOption = Annotated[
    float,
    typer.Option("--interval", min=0.2, metavar="SECONDS", help="With --watch: seconds between polls."),
]

Fetch = Callable[[], tuple[Any, Rows]]  # one listing: the whole answer (for json/yaml) and its rows


def _line(rows: Rows, index: int) -> tuple[str, ...]:
    return tuple(plain_text(cell) for cell in rows.rows[index])


def changed(before: set[tuple[str, ...]], rows: Rows) -> Rows:
    """The rows of `rows` that `before` did not have, cell for cell (a new row or a changed one)."""
    fresh = [i for i in range(len(rows.rows)) if _line(rows, i) not in before]

    def pick(values: Sequence[Any]) -> list[Any]:
        return [values[i] for i in fresh] if values else []

    # Every cell shown: a grouped row printed alone must carry its item's cells (its queue name).
    return replace(rows, rows=pick(rows.rows), names=pick(rows.names), items=pick(rows.items), group=0)


def watch(
    fetch: Fetch,
    out: Output,
    *,
    interval_s: float,
    no_headers: bool = False,
    sort_by: str = "",
    sleep: Callable[[float], None] = time.sleep,
    polls: int | None = None,
) -> None:
    """The listing, then the changed rows of each later listing; `polls` bounds the rounds (tests)."""
    data, rows = fetch()
    emit_rows(out, data, rows, no_headers=no_headers, sort_by=sort_by)
    seen = {_line(rows, i) for i in range(len(rows.rows))}
    done = 0
    try:
        while polls is None or done < polls:
            sleep(interval_s)
            done += 1
            _, rows = fetch()
            fresh = sorted_rows(changed(seen, rows), sort_by)
            seen = {_line(rows, i) for i in range(len(rows.rows))}
            if fresh.rows:
                answer = {fresh.key: unique_items(fresh.items)} if fresh.key else {}
                # No heading again and no title: the new lines read as the table going on.
                emit_rows(out, answer, replace(fresh, title=""), no_headers=True)
    except KeyboardInterrupt:
        return
