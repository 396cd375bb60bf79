"""`suanli dlq` option parsing that needs no broker."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import typer

from suanli.cli.dlq import parse_since

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_since_accepts_ages_and_iso_times() -> None:
    assert parse_since("30m", NOW) == ms(datetime(2026, 12, 1, 11, 30, tzinfo=UTC))
    assert parse_since("1d", NOW) == ms(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    assert parse_since("45s", NOW) == ms(datetime(2026, 12, 1, 11, 59, 15, tzinfo=UTC))
    assert parse_since("2026-12-01T10:00Z", NOW) == ms(datetime(2026, 12, 1, 10, tzinfo=UTC))
    # A time without a zone is UTC, as the broker's timestamps are.
    assert parse_since("2026-12-01T10:00", NOW) == parse_since("2026-12-01T10:00+00:00", NOW)
    assert parse_since("2026-12-01T18:00+08:00", NOW) == ms(datetime(2026, 12, 1, 10, tzinfo=UTC))


@pytest.mark.parametrize("text", ["yesterday", "5 minutes", "-3h", ""])
def test_since_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="neither an ISO time nor an age"):
        parse_since(text, NOW)
