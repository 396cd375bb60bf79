"""Pure rating: amounts equal values worked out by hand from the price book."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest

from suanli.billing.domain import ids
from suanli.billing.domain.errors import InvalidUsage, UnpricedUsage
from suanli.billing.domain.ledger import entries_for
from suanli.billing.domain.rating import rate
from suanli.billing.domain.usage import JobTerms, Usage, cu_seconds_from_float
from suanli.resources.pricebook import PriceBook
from suanli.resources.pricebook_file import parse_pricebook

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
CHANGE = datetime(2025, 4, 1, tzinfo=UTC)
STANDARD = JobTerms(priority=10, preemptible=False)


def book(**overrides: Any) -> PriceBook:
    data: dict[str, Any] = {
        "currency": "CNY",
        "granularity": {"seconds": 1, "rounding": "ROUND_UP"},
        "amount": {"scale": 6, "rounding": "ROUND_HALF_EVEN"},
        "tiers": [
            {"name": "high", "min_priority": 100},
            {"name": "standard", "min_priority": 0},
            {"name": "best-effort"},
        ],
        "versions": [
            {
                "effective_from": "2025-01-01T00:00:00Z",
                "rates": [
                    {"device_class": "*", "cu_hour": "2.00"},
                    {"device_class": "h200", "cu_hour": "3.60"},
                    {"device_class": "h200", "tier": "high", "cu_hour": "7.20"},
                    {"device_class": "h200", "region": "cn-west", "cu_hour": "1.80"},
                ],
                "discounts": {"preemptible": "0.25", "tiers": {"best-effort": "0.5"}},
            },
            {
                "effective_from": CHANGE.isoformat(),
                "rates": [
                    {"device_class": "*", "cu_hour": "2.00"},
                    {"device_class": "h200", "cu_hour": "7.20"},
                ],
            },
        ],
    }
    data.update(overrides)
    return parse_pricebook(data)


def usage(start: datetime = T0, seconds: float = 60, **cu: str) -> Usage:
    return Usage(
        event_id="00000000-0000-0000-0000-000000000001",
        tenant="acme",
        job_id="job-1",
        task_id="job-1/t0",
        node_id="n1",
        window_start=start,
        window_end=start + timedelta(seconds=seconds),
        cu_seconds=MappingProxyType({k: Decimal(v) for k, v in (cu or {"h200": "3600"}).items()}),
    )


def test_one_cu_hour_costs_the_rate() -> None:
    [charge] = rate(usage(h200="3600"), STANDARD, "cn-east", book())
    # 3600 CU-s = 1 CU-h at 3.60/CU-h
    assert charge.amount == Decimal("3.600000")
    assert charge.unit_price == Decimal("3.6")
    assert charge.cu_hours == Decimal("1.000000")
    assert (charge.tier, charge.region, charge.currency) == ("standard", "cn-east", "CNY")
    assert charge.charge_id == ids.charge_id(charge.usage_event_id or "", "h200", T0)


def test_each_device_class_is_its_own_charge_at_its_own_rate() -> None:
    charges = rate(usage(h200="1800", cpu="360"), STANDARD, "cn-east", book())
    assert {c.device_class: c.amount for c in charges} == {
        "cpu": Decimal("0.200000"),  # 0.1 CU-h x 2.00 (wildcard rate)
        "h200": Decimal("1.800000"),  # 0.5 CU-h x 3.60
    }


def test_most_specific_rate_wins() -> None:
    high = JobTerms(priority=150, preemptible=False)
    assert rate(usage(), high, "cn-east", book())[0].amount == Decimal("7.200000")
    # device class + region outranks device class + tier
    assert rate(usage(), high, "cn-west", book())[0].amount == Decimal("1.800000")


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        (JobTerms(10, preemptible=True), "2.700000"),  # 3.60 x 0.75
        (JobTerms(-5, preemptible=False), "1.800000"),  # best-effort: 3.60 x 0.5
        (JobTerms(-5, preemptible=True), "1.350000"),  # 3.60 x 0.5 x 0.75
    ],
)
def test_discounts_multiply(terms: JobTerms, expected: str) -> None:
    assert rate(usage(), terms, "cn-east", book())[0].amount == Decimal(expected)


def test_window_spanning_a_price_change_is_split_at_the_change() -> None:
    start = CHANGE - timedelta(seconds=20)
    charges = rate(usage(start, 60, h200="3600"), STANDARD, "cn-east", book())
    assert [(c.start, c.end) for c in charges] == [(start, CHANGE), (CHANGE, start + timedelta(seconds=60))]
    # 1/3 of the time at 3.60, 2/3 at 7.20: 1200 CU-s and 2400 CU-s
    assert [c.cu_seconds for c in charges] == [Decimal("1200.000000"), Decimal("2400.000000")]
    assert [c.amount for c in charges] == [Decimal("1.200000"), Decimal("4.800000")]
    assert len({c.charge_id for c in charges}) == 2


def test_price_change_is_never_retroactive() -> None:
    before = rate(usage(CHANGE - timedelta(seconds=60)), STANDARD, "cn-east", book())
    after = rate(usage(CHANGE), STANDARD, "cn-east", book())
    assert (before[0].amount, after[0].amount) == (Decimal("3.600000"), Decimal("7.200000"))


def test_split_pieces_add_up_exactly_when_the_share_does_not_divide() -> None:
    start = CHANGE - timedelta(seconds=20)
    charges = rate(usage(start, 60, h200="1"), STANDARD, "cn-east", book())
    assert [c.cu_seconds for c in charges] == [Decimal("0.333333"), Decimal("0.666667")]
    assert sum(c.cu_seconds for c in charges) == Decimal(1)


def test_extra_cuts_split_the_window_too() -> None:
    cut = T0 + timedelta(seconds=30)
    charges = rate(usage(), STANDARD, "cn-east", book(), cuts=[cut, T0 - timedelta(days=1)])
    assert [c.start for c in charges] == [T0, cut]
    assert sum(c.amount for c in charges) == Decimal("3.600000")


def test_duration_is_rounded_up_to_the_granularity() -> None:
    # 30.5 s window billed as 31 s: 1000 CU-s x 31/30.5
    [charge] = rate(usage(seconds=30.5, h200="1000"), STANDARD, "cn-east", book())
    assert charge.cu_seconds == Decimal("1016.393443")
    assert charge.amount == Decimal("1.016393")  # 1016.393443 x 3.6 / 3600 = 1.0163934430 -> 1.016393


def test_granularity_in_minutes_rounding_down() -> None:
    coarse = book(granularity={"seconds": 60, "rounding": "ROUND_DOWN"})
    assert rate(usage(seconds=59, h200="3600"), STANDARD, "cn-east", coarse) == []


@pytest.mark.parametrize(
    ("mode", "expected"), [("ROUND_HALF_EVEN", "0.02"), ("ROUND_HALF_UP", "0.03"), ("ROUND_DOWN", "0.02")]
)
def test_amount_rounding_mode_is_the_books(mode: str, expected: str) -> None:
    # 90 CU-s at 1.00/CU-h = 0.025 exactly: the tie shows the mode.
    one = book(
        amount={"scale": 2, "rounding": mode},
        versions=[{"effective_from": "2025-01-01T00:00:00Z", "rates": [{"device_class": "*", "cu_hour": 1}]}],
    )
    assert rate(usage(h200="90"), STANDARD, "x", one)[0].amount == Decimal(expected)


def test_unpriced_usage_names_what_is_missing() -> None:
    with pytest.raises(UnpricedUsage, match="no price-book version in effect"):
        rate(usage(datetime(2024, 12, 31, tzinfo=UTC)), STANDARD, "cn-east", book())
    narrow = book(
        versions=[
            {"effective_from": "2025-01-01T00:00:00Z", "rates": [{"device_class": "cpu", "cu_hour": 1}]}
        ]
    )
    with pytest.raises(UnpricedUsage, match="device_class='h200'"):
        rate(usage(), STANDARD, "cn-east", narrow)


def test_zero_usage_gives_no_charge() -> None:
    assert rate(usage(h200="0"), STANDARD, "cn-east", book()) == []


def test_double_entry_sums_to_zero_and_reversal_negates() -> None:
    [charge] = rate(usage(), STANDARD, "cn-east", book())
    debit, credit = entries_for(charge)
    assert (debit.account, credit.account) == ("tenant:acme:receivable", "revenue:compute:cn-east:h200")
    assert debit.amount + credit.amount == 0 and debit.amount == charge.amount
    back = charge.reversal()
    assert back.amount == -charge.amount and back.reverses == charge.charge_id
    assert back.charge_id != charge.charge_id and back.usage_event_id is None
    assert sum(e.amount for e in (*entries_for(charge), *entries_for(back))) == 0


def test_rating_is_deterministic() -> None:
    assert rate(usage(), STANDARD, "cn-east", book()) == rate(usage(), STANDARD, "cn-east", book())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"window_end": T0}, "is not after window_start"),
        ({"tenant": ""}, "tenant must not be empty"),
        ({"cu_seconds": {"h200": Decimal(-1)}}, "must be finite and >= 0"),
    ],
)
def test_invalid_usage_is_refused(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "event_id": "e",
        "tenant": "acme",
        "job_id": "j",
        "task_id": "t",
        "node_id": "n",
        "window_start": T0,
        "window_end": T0 + timedelta(seconds=60),
        **changes,
    }
    with pytest.raises(InvalidUsage, match=message):
        Usage(**fields)


def test_cu_seconds_from_float_keeps_the_written_decimal() -> None:
    assert cu_seconds_from_float(0.1) == Decimal("0.100000")
    with pytest.raises(InvalidUsage):
        cu_seconds_from_float(float("nan"))
