"""Billing periods in UTC: calendar months (default), ISO weeks, days, or a fixed length in minutes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from suanli.jobspec.units import parse_duration_s


class PeriodKind(StrEnum):
    MONTHLY = "monthly"
    WEEKLY = "weekly"
    DAILY = "daily"
    # A whole number of minutes that divides a day, so periods start at midnight UTC and every k x length
    # after it: short periods for demos and tests (and hourly billing) keep readable, stable labels.
    FIXED = "fixed"


MINUTES_PER_DAY = 24 * 60
HOURLY = "hourly"  # the setting's name for FIXED periods of 60 minutes
# Names a request may give instead of a label; they need the current time to mean anything.
CURRENT, PREVIOUS = "current", "previous"


@dataclass(frozen=True, slots=True, order=True)
class Period:
    start: datetime
    end: datetime
    kind: PeriodKind

    @property
    def label(self) -> str:
        """'2025-03' for a month; the first day ('2025-03-03') for a week or a day; '2025-03-03T14:05Z'
        (its start, to the minute) for a fixed length."""
        if self.kind is PeriodKind.MONTHLY:
            return self.start.strftime("%Y-%m")
        if self.kind is PeriodKind.FIXED:
            return self.start.strftime("%Y-%m-%dT%H:%MZ")
        return self.start.strftime("%Y-%m-%d")

    def contains(self, at: datetime) -> bool:
        return self.start <= at < self.end


_LABEL = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2})(?:[T ](\d{2}):(\d{2})Z?)?)?$")
LABEL_FORMS = "YYYY-MM, YYYY-MM-DD, YYYY-MM-DDTHH:MMZ, current or previous"
SETTING_FORMS = (
    "monthly, weekly, daily, hourly, or a length of whole minutes that divides a day (e.g. 5m, 2h)"
)


@dataclass(frozen=True, slots=True)
class Calendar:
    kind: PeriodKind = PeriodKind.MONTHLY
    minutes: int = 0  # the length of FIXED periods; 0 for the others

    def __post_init__(self) -> None:
        if self.kind is PeriodKind.FIXED:
            if not 0 < self.minutes <= MINUTES_PER_DAY or MINUTES_PER_DAY % self.minutes:
                raise ValueError(
                    f"a fixed billing period must be whole minutes that divide a day, got {self.minutes}"
                )
        elif self.minutes:
            raise ValueError(f"{self.kind.value} periods have no length in minutes")

    @classmethod
    def from_setting(cls, text: str) -> Calendar:
        """`monthly`, `weekly`, `daily`, `hourly`, or a length such as `5m`, `2h` or `1h30m`."""
        name = text.strip().lower()
        if name == HOURLY:
            return cls(PeriodKind.FIXED, 60)
        if name in (PeriodKind.MONTHLY, PeriodKind.WEEKLY, PeriodKind.DAILY):
            return cls(PeriodKind(name))
        try:
            seconds = parse_duration_s(name)
        except ValueError:
            raise ValueError(f"must be {SETTING_FORMS}, got {text!r}") from None
        if seconds <= 0 or seconds % 60 or MINUTES_PER_DAY % (seconds // 60):
            raise ValueError(f"must be {SETTING_FORMS}, got {text!r}")
        return cls(PeriodKind.FIXED, int(seconds // 60))

    @property
    def setting(self) -> str:
        """How `from_setting` names this calendar: `monthly`, ..., `5m`, `2h`."""
        if self.kind is not PeriodKind.FIXED:
            return self.kind.value
        return f"{self.minutes // 60}h" if self.minutes % 60 == 0 else f"{self.minutes}m"

    def period_of(self, at: datetime) -> Period:
        at = at.astimezone(UTC)
        day = at.replace(hour=0, minute=0, second=0, microsecond=0)
        if self.kind is PeriodKind.MONTHLY:
            start = day.replace(day=1)
            end = (start + timedelta(days=32)).replace(day=1)
        elif self.kind is PeriodKind.WEEKLY:
            start = day - timedelta(days=day.weekday())
            end = start + timedelta(days=7)
        elif self.kind is PeriodKind.FIXED:
            length = timedelta(minutes=self.minutes)
            start = day + (at - day) // length * length
            end = start + length
        else:
            start, end = day, day + timedelta(days=1)
        return Period(start, end, self.kind)

    def next(self, period: Period) -> Period:
        return self.period_of(period.end)

    def previous(self, period: Period) -> Period:
        return self.period_of(period.start - timedelta(microseconds=1))

    def boundaries_within(self, start: datetime, end: datetime) -> list[datetime]:
        """Period starts strictly inside (start, end): where a usage window must be cut."""
        found = []
        boundary = self.period_of(start).end
        while boundary < end:
            found.append(boundary)
            boundary = self.period_of(boundary).end
        return found

    def parse(self, label: str, now: datetime | None = None) -> Period:
        """The period containing a label's instant, or `current` / `previous` relative to `now`.

        ValueError if malformed (or relative without `now`).
        """
        text = label.strip()
        if now is not None and text.lower() in (CURRENT, PREVIOUS):
            current = self.period_of(now)
            return current if text.lower() == CURRENT else self.previous(current)
        match = _LABEL.match(text)
        if not match:
            raise ValueError(f"period must be {LABEL_FORMS}, got {label!r}")
        year, month, day = int(match[1]), int(match[2]), int(match[3] or 1)
        hour, minute = int(match[4] or 0), int(match[5] or 0)
        try:
            at = datetime(year, month, day, hour, minute, tzinfo=UTC)
        except ValueError as exc:
            raise ValueError(f"period {label!r}: {exc}") from None
        return self.period_of(at)


def closable(period: Period, now: datetime, grace: timedelta) -> bool:
    """A period closes once it ended and the grace for late usage has passed."""
    return now >= period.end + grace
