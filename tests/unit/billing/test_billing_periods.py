"""Periods of a fixed length (the setting's `5m`, `2h`, `hourly`), their labels, and the relative names
`current` / `previous` every period field accepts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from suanli.billing.domain.periods import Calendar, PeriodKind

AT = datetime(2025, 2, 14, 13, 7, 30, tzinfo=UTC)


def test_fixed_periods_start_at_midnight_and_every_length_after() -> None:
    five = Calendar.from_setting("5m")
    period = five.period_of(AT)
    assert (period.start, period.end, period.label) == (
        datetime(2025, 2, 14, 13, 5, tzinfo=UTC),
        datetime(2025, 2, 14, 13, 10, tzinfo=UTC),
        "2025-02-14T13:05Z",
    )
    assert five.next(period).label == "2025-02-14T13:10Z"
    assert five.previous(period).label == "2025-02-14T13:00Z"
    # The last period of a day ends at the next midnight, so days never share a period.
    assert five.period_of(datetime(2025, 2, 14, 23, 59, tzinfo=UTC)).end == datetime(2025, 2, 15, tzinfo=UTC)
    assert five.boundaries_within(AT, AT + timedelta(minutes=6)) == [
        datetime(2025, 2, 14, 13, 10, tzinfo=UTC)
    ]


@pytest.mark.parametrize(
    ("setting", "calendar", "named"),
    [
        ("monthly", Calendar(), "monthly"),
        (" Weekly ", Calendar(PeriodKind.WEEKLY), "weekly"),
        ("daily", Calendar(PeriodKind.DAILY), "daily"),
        ("hourly", Calendar(PeriodKind.FIXED, 60), "1h"),
        ("2h", Calendar(PeriodKind.FIXED, 120), "2h"),
        ("1h30m", Calendar(PeriodKind.FIXED, 90), "90m"),
        ("300s", Calendar(PeriodKind.FIXED, 5), "5m"),
        ("1m", Calendar(PeriodKind.FIXED, 1), "1m"),
    ],
)
def test_settings_name_calendars(setting: str, calendar: Calendar, named: str) -> None:
    assert Calendar.from_setting(setting) == calendar
    assert calendar.setting == named and Calendar.from_setting(named) == calendar


@pytest.mark.parametrize("bad", ["yearly", "7m", "90s", "0m", "25h", "5", "m5", ""])
def test_a_length_must_be_whole_minutes_dividing_a_day(bad: str) -> None:
    with pytest.raises(ValueError, match="whole minutes that divides a day"):
        Calendar.from_setting(bad)


def test_labels_parse_to_the_period_containing_them() -> None:
    quarter = Calendar.from_setting("15m")
    assert quarter.parse("2025-02-14T13:05Z").label == "2025-02-14T13:00Z"
    assert quarter.parse("2025-02-14 13:15").label == "2025-02-14T13:15Z"
    assert quarter.parse("2025-02-14").label == "2025-02-14T00:00Z"
    assert Calendar().parse("2025-02-14T13:05Z").label == "2025-02"
    for bad in ("2025-02-14T25:00Z", "2025-02-14T13", "current"):
        with pytest.raises(ValueError, match="period"):
            quarter.parse(bad)  # without `now`, "current" means nothing


def test_current_and_previous_are_relative_to_now() -> None:
    assert Calendar().parse("current", AT).label == "2025-02"
    assert Calendar().parse(" Previous", AT).label == "2025-01"
    assert Calendar.from_setting("hourly").parse("previous", AT).label == "2025-02-14T12:00Z"
    assert Calendar(PeriodKind.WEEKLY).parse("previous", AT).label == "2025-02-03"
