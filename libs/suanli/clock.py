"""Time and identity for every floor: one Clock protocol, one id factory, one millisecond rule.

Cores never read the system clock or draw ids themselves; a ``Clock`` and an ``IdFactory`` are passed
in, so the same inputs replay to the same decisions. Event times travel as Avro ``timestamp-millis``:
``to_ms`` floors to the millisecond (the rule for instants and for durations alike), so a time read
back from an event is never later than the time it was written from.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol
from uuid import UUID

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


class Clock(Protocol):
    """The time now, as an aware UTC datetime (naive times would be ambiguous in timestamptz)."""

    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""


IdFactory = Callable[[], UUID]
"""Makes a new unique id (``uuid4_factory`` in production, a counter in tests)."""

MillisClock = Callable[[], int]
"""The time now in integer UTC milliseconds, for cores that count in the units events carry."""


class SystemClock:
    """The machine's wall clock in UTC."""

    def now(self) -> datetime:
        """The system's current time in UTC."""
        return datetime.now(UTC)


class SteppingClock:
    """A deterministic clock for tests: every reading advances by ``step``."""

    def __init__(self, start: datetime | None = None, step: timedelta = _MS) -> None:
        self._now = start or datetime(2024, 1, 1, tzinfo=UTC)
        self._step = step

    def now(self) -> datetime:
        """The current reading; the next one is ``step`` later."""
        current = self._now
        self._now += self._step
        return current


class ManualClock:
    """A clock for tests that moves only when told to (``advance``, ``set``)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2024, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        """The time the test last set or advanced to."""
        return self._now

    def advance(self, delta: timedelta) -> None:
        """Move the clock forward by ``delta``."""
        self._now += delta

    def set(self, at: datetime) -> None:
        """Put the clock at ``at``."""
        self._now = at


def uuid4_factory() -> UUID:
    """A random (version 4) UUID."""
    return uuid.uuid4()


def url_namespace(url: str) -> str:
    """A namespace for ``name_id``, derived from a URL (UUID text, stable forever for that URL)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, url))


def name_id(namespace: str, name: str) -> str:
    """A deterministic id (UUID v5 text) for ``name`` in ``namespace``: the same fact, the same id.

    Cores derive the ids of the records they produce this way, so a replay re-emits what consumers
    already have instead of new records; they never draw random ids.
    """
    return str(uuid.uuid5(uuid.UUID(namespace), name))


def to_ms(at: datetime) -> int:
    """UTC milliseconds since the epoch, floored; a naive datetime is refused."""
    if at.utcoffset() is None:
        raise ValueError("naive datetime: event times are UTC-aware")
    return (at - EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime of ``ms`` milliseconds since the epoch."""
    return EPOCH + timedelta(milliseconds=ms)


def duration_ms(delta: timedelta) -> int:
    """A duration in whole milliseconds, floored (the same rule as ``to_ms``)."""
    return delta // _MS


def system_ms() -> int:
    """The wall clock in UTC milliseconds (a ``MillisClock``)."""
    return time.time_ns() // 1_000_000
