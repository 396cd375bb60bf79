"""What the billing contract fixtures yield, and the facts the suites write (imported by name)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType

from suanli.billing.domain.invoices import ChargeTotal, Invoice, build_invoice
from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.domain.periods import Calendar, Period
from suanli.billing.domain.rating import rate
from suanli.billing.domain.usage import JobTerms, Usage
from suanli.billing.service_layer.ports import BillingQueries, UnitOfWork
from suanli.eventstore import InMemoryEventStore, PostgresEventStore
from suanli.resources.pricebook import PriceBook

BILLING_TOPIC = "billing.events"
CALENDAR = Calendar()
JAN = datetime(2025, 1, 10, 8, 0, tzinfo=UTC)
JANUARY = CALENDAR.period_of(JAN)
FEBRUARY = CALENDAR.next(JANUARY)
STANDARD = JobTerms(priority=10, preemptible=False)
BOOK = PriceBook.model_validate(
    {
        "currency": "CNY",
        "tiers": [{"name": "standard", "min_priority": 0}, {"name": "best-effort"}],
        "versions": [
            {
                "effective_from": "2024-01-01T00:00:00Z",
                "rates": [
                    {"device_class": "*", "cu_hour": "1.80"},
                    {"device_class": "h200", "cu_hour": "3.60"},
                ],
            }
        ],
    }
)


@dataclass
class Adapter:
    """A unit of work under test, the read side over the same rows, and the event store below both."""

    name: str
    uow: UnitOfWork
    queries: BillingQueries
    store: InMemoryEventStore | PostgresEventStore


def usage(
    n: int = 1,
    *,
    tenant: str = "acme",
    job: str = "job-1",
    node: str = "n-1",
    start: datetime = JAN,
    seconds: int = 60,
    **cu_seconds: str,
) -> Usage:
    """Usage event number `n` (its id derives from `n`), 100 H200 CU unless `cu_seconds` says otherwise."""
    return Usage(
        event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"usage/{n}")),
        tenant=tenant,
        job_id=job,
        task_id=f"{job}/t0",
        node_id=node,
        window_start=start,
        window_end=start + timedelta(seconds=seconds),
        cu_seconds=MappingProxyType({k: Decimal(v) for k, v in (cu_seconds or {"h200": "6000"}).items()}),
    )


def billed(u: Usage, billing_period: Period | None = None, region: str = "cn-east") -> list[BilledCharge]:
    """The charges of `u` as the use case bills them (in `billing_period` when given)."""
    return [
        BilledCharge(c, CALENDAR.period_of(c.start), billing_period or CALENDAR.period_of(c.start))
        for c in rate(u, STANDARD, region, BOOK)
    ]


def invoice(tenant: str, period: Period, totals: list[ChargeTotal], issued_at: datetime) -> Invoice:
    return build_invoice(tenant, period, BOOK.currency, totals, issued_at=issued_at)
