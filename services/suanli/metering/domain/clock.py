"""Time in the core is integer UTC milliseconds (what ``timestamp-millis`` carries); the clock is injected."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

Clock = Callable[[], int]  # now, UTC milliseconds


def to_ms(at: dt.datetime) -> int:
    if at.utcoffset() is None:
        raise ValueError("naive datetime: event times are UTC-aware")
    delta = at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return delta // dt.timedelta(milliseconds=1)


def from_ms(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
