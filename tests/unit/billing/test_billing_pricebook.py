"""Price-book validation (a bad file is refused naming the field), periods and invoices."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from suanli.billing.domain.invoices import ChargeTotal, build_invoice
from suanli.billing.domain.periods import Calendar, PeriodKind, closable
from suanli.data import data_path
from suanli.resources.pricebook_file import PriceBookError, load_pricebook, parse_pricebook

VALID: dict[str, Any] = {
    "currency": "EUR",
    "tiers": [{"name": "standard", "min_priority": 0}, {"name": "best-effort"}],
    "versions": [
        {"effective_from": "2025-01-01T00:00:00Z", "rates": [{"device_class": "*", "cu_hour": "1"}]}
    ],
}


def test_the_shipped_price_book_loads() -> None:
    book = load_pricebook(data_path("deploy/billing/pricebook.yaml"))
    assert book.currency == "CNY" and len(book.versions) == 2
    assert [book.tier_for(p) for p in (100, 0, -1)] == ["high", "standard", "best-effort"]


def test_defaults_apply() -> None:
    book = parse_pricebook(VALID)
    assert (book.granularity.seconds, book.granularity.rounding) == (1, "ROUND_UP")
    assert (book.amount.scale, book.amount.rounding) == (6, "ROUND_HALF_EVEN")


def test_yaml_floats_are_read_by_their_decimal_text() -> None:
    book = parse_pricebook(
        {
            **VALID,
            "versions": [
                {"effective_from": "2025-01-01T00:00:00Z", "rates": [{"device_class": "*", "cu_hour": 0.1}]}
            ],
        }
    )
    assert book.versions[0].rates[0].cu_hour == Decimal("0.1")


def _with_version(**changes: Any) -> dict[str, Any]:
    return {**VALID, "versions": [{**VALID["versions"][0], **changes}]}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({**VALID, "currency": "euro"}, "currency"),
        (_with_version(rates=[{"device_class": "*", "cu_hour": "-1"}]), "versions[0].rates[0].cu_hour"),
        (_with_version(rates=[{"device_class": "*", "price": "1"}]), "versions[0].rates[0].cu_hour"),
        (_with_version(effective_from="2025-01-01T00:00:00"), "versions[0].effective_from"),
        (_with_version(discounts={"preemptible": "1.5"}), "versions[0].discounts.preemptible"),
        ({**VALID, "amount": {"scale": 9}}, "amount.scale"),
        ({**VALID, "granularity": {"rounding": "ROUND_SOMETIMES"}}, "granularity.rounding"),
        ({**VALID, "tiers": [{"name": "a"}, {"name": "b", "min_priority": 1}]}, "tiers"),
        ({**VALID, "versions": [VALID["versions"][0]] * 2}, "versions"),
        (_with_version(rates=[{"device_class": "*", "cu_hour": 1}] * 2), "versions[0].rates"),
        (
            _with_version(rates=[{"device_class": "*", "tier": "gold", "cu_hour": 1}]),
            "versions[0].rates[0].tier",
        ),
    ],
)
def test_bad_book_is_refused_naming_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(PriceBookError) as info:
        parse_pricebook(data, "book.yaml")
    assert str(info.value).startswith(f"book.yaml: {field}: ")


def test_bad_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "book.yaml"
    path.write_text("currency: [unclosed")
    with pytest.raises(PriceBookError, match="not valid YAML"):
        load_pricebook(path)
    with pytest.raises(PriceBookError, match="cannot read"):
        load_pricebook(tmp_path / "missing.yaml")


def test_monthly_weekly_daily_periods() -> None:
    at = datetime(2025, 2, 14, 13, 5, tzinfo=UTC)
    month = Calendar().period_of(at)
    assert (month.start, month.end, month.label) == (
        datetime(2025, 2, 1, tzinfo=UTC),
        datetime(2025, 3, 1, tzinfo=UTC),
        "2025-02",
    )
    week = Calendar(PeriodKind.WEEKLY).period_of(at)
    assert (week.start, week.label) == (datetime(2025, 2, 10, tzinfo=UTC), "2025-02-10")
    assert Calendar(PeriodKind.DAILY).period_of(at).end == datetime(2025, 2, 15, tzinfo=UTC)
    assert Calendar().next(month).label == "2025-03"
    assert Calendar().parse("2025-12") == Calendar().period_of(datetime(2025, 12, 31, tzinfo=UTC))
    assert Calendar().boundaries_within(
        datetime(2025, 1, 31, 23, 59, 30, tzinfo=UTC), datetime(2025, 2, 1, 0, 0, 30, tzinfo=UTC)
    ) == [month.start]
    for bad in ("2025", "2025-13", "2025-02-30", "feb"):
        with pytest.raises(ValueError, match="period"):
            Calendar().parse(bad)


def test_period_closes_after_its_grace() -> None:
    month = Calendar().parse("2025-02")
    assert not closable(month, month.end, timedelta(minutes=15))
    assert closable(month, month.end + timedelta(minutes=15), timedelta(minutes=15))


def test_invoice_lines_per_device_class_then_adjustments() -> None:
    cal = Calendar()
    feb, jan = cal.parse("2025-02"), cal.parse("2025-01")
    invoice = build_invoice(
        "acme",
        feb,
        "CNY",
        [
            ChargeTotal("h200", jan, Decimal("3600"), Decimal("1.50")),
            ChargeTotal("h200", feb, Decimal("7200"), Decimal("7.20")),
            ChargeTotal("cpu", feb, Decimal("1800"), Decimal("0.25")),
        ],
        issued_at=feb.end,
    )
    assert [(ln.device_class, ln.cu_hours, ln.amount, ln.adjustment_of) for ln in invoice.lines] == [
        ("cpu", Decimal("0.500000"), Decimal("0.25"), None),
        ("h200", Decimal("2.000000"), Decimal("7.20"), None),
        ("h200", Decimal("1.000000"), Decimal("1.50"), "2025-01"),
    ]
    assert invoice.total == Decimal("8.95")
    assert "late h200 usage of 2025-01" in invoice.lines[2].description
