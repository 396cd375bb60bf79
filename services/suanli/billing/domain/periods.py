"""Billing periods: calendar months (default), ISO weeks or days, in UTC."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum


class PeriodKind(StrEnum):
    MONTHLY = "monthly"
    WEEKLY = "weekly"
    DAILY = "daily"


@dataclass(frozen=True, slots=True, order=True)
class Period:
    start: datetime
    end: datetime
    kind: PeriodKind

    @property
    def label(self) -> str:
        """'2025-03' for a month; the first day ('2025-03-03') for a week or a day."""
        if self.kind is PeriodKind.MONTHLY:
            return self.start.strftime("%Y-%m")
        return self.start.strftime("%Y-%m-%d")

    def contains(self, at: datetime) -> bool:
        return self.start <= at < self.end


_LABEL = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")


@dataclass(frozen=True, slots=True)
class Calendar:
    kind: PeriodKind = PeriodKind.MONTHLY

    def period_of(self, at: datetime) -> Period:
        at = at.astimezone(UTC)
        day = at.replace(hour=0, minute=0, second=0, microsecond=0)
        if self.kind is PeriodKind.MONTHLY:
            start = day.replace(day=1)
            end = (start + timedelta(days=32)).replace(day=1)
        elif self.kind is PeriodKind.WEEKLY:
            start = day - timedelta(days=day.weekday())
            end = start + timedelta(days=7)
        else:
            start, end = day, day + timedelta(days=1)
        return Period(start, end, self.kind)

    def next(self, period: Period) -> Period:
        return self.period_of(period.end)

    def boundaries_within(self, start: datetime, end: datetime) -> list[datetime]:
        """Period starts strictly inside (start, end): where a usage window must be cut."""
        found = []
        boundary = self.period_of(start).end
        while boundary < end:
            found.append(boundary)
            boundary = self.period_of(boundary).end
        return found

    def parse(self, label: str) -> Period:
        """The period containing 'YYYY-MM' (its first day) or 'YYYY-MM-DD'; ValueError if malformed."""
        match = _LABEL.match(label.strip())
        if not match:
            raise ValueError(f"period must look like YYYY-MM or YYYY-MM-DD, got {label!r}")
        year, month, day = int(match[1]), int(match[2]), int(match[3] or 1)
        try:
            at = datetime(year, month, day, tzinfo=UTC)
        except ValueError as exc:
            raise ValueError(f"period {label!r}: {exc}") from None
        return self.period_of(at)


def closable(period: Period, now: datetime, grace: timedelta) -> bool:
    """A period closes once it ended and the grace for late usage has passed."""
    return now >= period.end + grace
