"""Time and identity for every floor: one Clock protocol, one id factory, one millisecond rule.

Cores never read the system clock or draw ids themselves; a ``Clock`` and an ``IdFactory`` are passed
in, so the same inputs replay to the same decisions. Event times travel as Avro ``timestamp-millis``:
``to_ms`` floors to the millisecond (the rule for instants and for durations alike), so a time read
back from an event is never later than the time it was written from.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class StreamClock:
    """How far one partition of a stream has been read: the newest event time consumed, and when."""

    newest_ms: int = -1  # event time of the newest record consumed
    read_at_ms: int = -1  # the reader's clock when it was consumed

    def advanced(self, record_ms: int, now_ms: int) -> StreamClock:
        """After a record stamped ``record_ms`` was read at ``now_ms`` (an older one moves nothing)."""
        return StreamClock(max(self.newest_ms, record_ms), now_ms)

    def now(self, wall_ms: int, quiet_ms: int, responsive_since_ms: int = -1, behind: bool = False) -> int:
        """The stream's time: the newest event time while records flow.

        After ``quiet_ms`` without any, counted from the later of the last read and
        ``responsive_since_ms`` (when the reader last came out of a stall of its own): the wall clock
        less the lag seen when the last one was read. Never while ``behind`` (the broker holds records of
        the partition the reader has not handled yet): the silence is then the reader's own backlog.
        """
        if self.newest_ms < 0:
            return wall_ms
        if behind or wall_ms - max(self.read_at_ms, responsive_since_ms) < quiet_ms:
            return self.newest_ms
        return wall_ms - max(0, self.read_at_ms - self.newest_ms)


# A partition the broker has not answered a fetch of for this long (or half the quiet time, if longer) is
# unheard. A responsive consumer is answered every fetch wait (a few hundred ms here); the floor keeps a
# consumer merely starved of CPU for a second from being taken for one cut off from its broker.
UNHEARD_FLOOR_MS = 2_000


class StreamTimes:
    """Per partition, the time silence is judged at, so a reader's own backlog never looks like silence.

    A checker that declares a source silent (a node lost, a network path down) after ``quiet_ms`` must
    not count the time the reader spent behind: while it works through a backlog, each partition's time
    moves only as fast as the records read from it (`StreamClock`). A check that comes late by more
    than half the quiet time means the reader itself stalled, which restarts the quiet time. A partition
    the broker has not answered a fetch of for that long, and at least `UNHEARD_FLOOR_MS` (the broker
    down, restarting, or out of reach: its sources may be trying to reach it too), is not judged at all
    until it has been answered for a whole quiet time: the first records after the gap would move its
    time past every source whose own records are still to come.
    ``started_ms``: when the reader started; a partition not read since then is not judged until
    ``quiet_ms`` has passed (-1: judged at the wall clock at once).
    """

    def __init__(self, started_ms: int = -1) -> None:
        self.partitions: dict[int | None, StreamClock] = {}
        self._started_ms = started_ms
        self._responsive_since_ms = started_ms
        self._last_check_ms: int | None = None
        # Per partition, the last check at which the broker had not answered a fetch of it lately.
        self._unheard_at_ms: dict[int | None, int] = {}

    def restart(self, now_ms: int) -> None:
        """The reader (re)started reading at ``now_ms`` (a start, a rebalance): its backlog is unknown."""
        self._started_ms = self._responsive_since_ms = now_ms

    def read(self, partition: int | None, record_ms: int, now_ms: int) -> None:
        """A record stamped ``record_ms`` was consumed from ``partition`` at ``now_ms``."""
        self.partitions[partition] = self.partitions.get(partition, StreamClock()).advanced(record_ms, now_ms)

    def newest(self, partition: int | None) -> int:
        """The newest event time read from ``partition`` (-1: nothing yet)."""
        clock = self.partitions.get(partition)
        return -1 if clock is None else clock.newest_ms

    def judge(
        self,
        wall_ms: int,
        quiet_ms: int,
        behind: Collection[int | None] = (),
        heard: Mapping[int | None, int | None] | None = None,
    ) -> Callable[[int | None], int | None]:
        """For this check: each partition's time (None: not to be judged yet).

        ``behind``: partitions the broker holds records of that the reader has not handled yet; their
        time is only ever what has been read from them (a partition not read at all: not judged).
        ``heard``: per partition, when the broker last answered a fetch of it, records or none (None:
        never). One not answered for more than half the quiet time (at least `UNHEARD_FLOOR_MS`) is not
        judged until a whole quiet time after the last check that found it so (partitions left out:
        judged as answered). For this to protect a source, the quiet time must exceed that threshold by
        the interval between checks: a check must find the partition unheard before the silence counts.
        """
        if self._last_check_ms is not None and wall_ms - self._last_check_ms > quiet_ms // 2:
            self._responsive_since_ms = wall_ms  # stalled: what was not read meanwhile may be our backlog
        self._last_check_ms = wall_ms
        unheard_after = max(quiet_ms // 2, UNHEARD_FLOOR_MS)
        unheard = {p for p, at in (heard or {}).items() if at is None or wall_ms - at > unheard_after}
        for p in unheard:
            self._unheard_at_ms[p] = wall_ms
        # Unheard lately, or answered again less than a quiet time ago: the first records after the gap
        # move the partition's time past every source whose own records are still to come.
        waking = {p for p, at in self._unheard_at_ms.items() if wall_ms - at < quiet_ms}
        since = self._responsive_since_ms
        times = {
            p: clock.now(wall_ms, quiet_ms, since, p in behind)
            for p, clock in self.partitions.items()
            if p not in waking
        }
        unread = wall_ms if wall_ms - self._started_ms >= quiet_ms else None

        def time_of(partition: int | None) -> int | None:
            if partition in waking:
                return None
            return times.get(partition, None if partition in behind else unread)

        return time_of
