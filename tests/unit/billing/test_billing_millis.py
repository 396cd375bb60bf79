"""One millisecond rule (suanli.clock: floor) in place of billing's three: charges do not change.

Before, charge and invoice ids took `int(at.timestamp() * 1000)` (truncating a float), a usage window's
duration `round(end.timestamp() * 1000) - round(start.timestamp() * 1000)`, and the split
`delta // 1 ms`. Billing only ever sees whole-millisecond times: usage arrives as Avro timestamp-millis
and parked usage keeps what arrived. For those the old and the new rule agree, proven below on the
values themselves and on the charges rated from them; only sub-millisecond bounds, which no event can
carry, would be rated differently.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType

from billing_unit_kit import BOOK, STANDARD

from suanli.billing.adapters import records
from suanli.billing.domain import ids
from suanli.billing.domain.periods import Calendar, PeriodKind
from suanli.billing.domain.rating import rate
from suanli.billing.domain.usage import Usage
from suanli.clock import duration_ms, from_ms, to_ms
from suanli.contracts import decode, default_registry, encode, sample_records

LOW, HIGH = to_ms(datetime(2020, 1, 1, tzinfo=UTC)), to_ms(datetime(2035, 1, 1, tzinfo=UTC))
SAMPLES = 20_000


def legacy_id_ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def legacy_duration_ms(start: datetime, end: datetime) -> int:
    return round(end.timestamp() * 1000) - round(start.timestamp() * 1000)


def usage_metered(start: datetime, end: datetime, n: int = 0) -> Usage:
    """A UsageMetered record as billing receives it: through the Avro encoding (timestamp-millis)."""
    record = dict(sample_records(default_registry().current("UsageMetered"))[0])
    record |= {
        "event_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"usage/{n}")),
        "node_id": "n-east",
        "window_start": start,
        "window_end": end,
        "cu_seconds": {"h200": 6000.0, "cpu": 37.5},
    }
    _, back = decode(encode("UsageMetered", record))
    return records.usage_from_record(back)


def test_usage_windows_arrive_in_whole_milliseconds() -> None:
    start = datetime(2025, 1, 10, 8, 0, 0, 123_789, tzinfo=UTC)
    u = usage_metered(start, start + timedelta(seconds=60, microseconds=999))
    assert (u.window_start.microsecond, u.window_end.microsecond) == (123_000, 124_000)


def test_old_and_new_rules_agree_on_whole_millisecond_times() -> None:
    rng = random.Random(9)
    instants = [rng.randrange(LOW, HIGH) for _ in range(SAMPLES)]
    instants += range(
        to_ms(datetime(2025, 1, 10, tzinfo=UTC)), to_ms(datetime(2025, 1, 10, tzinfo=UTC)) + SAMPLES
    )
    for ms in instants:
        at = from_ms(ms)
        assert to_ms(at) == legacy_id_ms(at) == ms
        end = at + timedelta(milliseconds=rng.randrange(1, 3_600_000))
        assert duration_ms(end - at) == legacy_duration_ms(at, end)


def test_period_starts_and_their_invoice_ids_are_unchanged() -> None:
    for setting in (*(k.value for k in PeriodKind if k is not PeriodKind.FIXED), "hourly", "5m"):
        calendar = Calendar.from_setting(setting)
        period = calendar.period_of(datetime(2025, 1, 10, tzinfo=UTC))
        for _ in range(400):
            legacy = str(uuid.uuid5(uuid.UUID(ids.NAMESPACE), f"invoice/acme/{legacy_id_ms(period.start)}"))
            assert ids.invoice_id("acme", period.start) == legacy
            period = calendar.next(period)


def test_charges_rated_from_events_are_unchanged() -> None:
    rng = random.Random(3)
    calendar = Calendar()
    for n in range(2_000):
        start = from_ms(rng.randrange(to_ms(BOOK.versions[0].effective_from), HIGH))
        u = usage_metered(start, start + timedelta(milliseconds=rng.randrange(1, 7_200_000)), n)
        assert u.duration_ms == legacy_duration_ms(u.window_start, u.window_end)
        for charge in rate(
            u, STANDARD, "cn-east", BOOK, calendar.boundaries_within(u.window_start, u.window_end)
        ):
            legacy_id = uuid.uuid5(
                uuid.UUID(ids.NAMESPACE),
                f"charge/{u.event_id}/{charge.device_class}/{legacy_id_ms(charge.start)}",
            )
            assert charge.charge_id == str(legacy_id)


def test_a_known_window_rates_as_before() -> None:
    # 90.5 s of 100 CU billed as 91 s (granularity 1 s, rounded up) at 3.60 per CU-hour.
    start = datetime(2025, 1, 10, 8, 0, 0, 250_000, tzinfo=UTC)
    [charge] = [
        c
        for c in rate(usage_metered(start, start + timedelta(seconds=90.5)), STANDARD, "cn-east", BOOK)
        if c.device_class == "h200"
    ]
    assert charge.cu_seconds == Decimal("6033.149171")  # 6000 x 91 / 90.5
    assert charge.amount == Decimal("6.033149")


def test_sub_millisecond_bounds_follow_the_floor_rule() -> None:
    # Not producible by events (see above); shown so the one case where the rules part is on record:
    # the old rounding made 60.0002 s last 60 001 ms, the floor makes it 60 000 ms.
    start = datetime(2025, 1, 10, 8, 0, 0, 400, tzinfo=UTC)
    end = start + timedelta(seconds=60, microseconds=200)
    u = Usage(
        "e", "acme", "job-1", "job-1/t0", "n-east", start, end, MappingProxyType({"h200": Decimal(6000)})
    )
    assert (u.duration_ms, legacy_duration_ms(start, end)) == (60_000, 60_001)
