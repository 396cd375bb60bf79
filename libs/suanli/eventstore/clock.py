"""Time and identity are passed in, so the store's behaviour is reproducible in tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol
from uuid import UUID


class Clock(Protocol):
    def now(self) -> datetime:
        """An aware datetime (PostgreSQL stores timestamptz; naive times would be ambiguous)."""
        ...


IdFactory = Callable[[], UUID]


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class SteppingClock:
    """A deterministic clock for tests: every reading advances by `step`."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(milliseconds=1)) -> None:
        self._now = start or datetime(2024, 1, 1, tzinfo=UTC)
        self._step = step

    def now(self) -> datetime:
        current = self._now
        self._now += self._step
        return current


def uuid4_factory() -> UUID:
    return uuid.uuid4()
