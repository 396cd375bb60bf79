"""Billing on the in-memory adapters: the service, its unit of work and its read side, for unit tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType

from suanli.billing.adapters.memory import InMemoryBillingQueries, InMemoryUnitOfWork
from suanli.billing.domain.periods import Calendar
from suanli.billing.domain.usage import JobTerms, Usage
from suanli.billing.service_layer.billing import BillingService
from suanli.clock import ManualClock
from suanli.eventstore import InMemoryEventStore
from suanli.resources.pricebook import PriceBook

JAN = datetime(2025, 1, 10, 8, 0, tzinfo=UTC)
STANDARD = JobTerms(priority=10, preemptible=False)
CHEAP = JobTerms(priority=-1, preemptible=True)
BOOK = PriceBook.model_validate(
    {
        "currency": "CNY",
        "tiers": [{"name": "standard", "min_priority": 0}, {"name": "best-effort"}],
        "versions": [
            {
                "effective_from": "2025-01-01T00:00:00Z",
                "rates": [
                    {"device_class": "*", "cu_hour": "1.80"},
                    {"device_class": "h200", "cu_hour": "3.60"},
                    {"device_class": "h200", "region": "cn-west", "cu_hour": "2.88"},
                ],
                "discounts": {"preemptible": "0.25", "tiers": {"best-effort": "0.50"}},
            }
        ],
    }
)


@dataclass
class Billing:
    service: BillingService
    uow: InMemoryUnitOfWork
    queries: InMemoryBillingQueries
    clock: ManualClock

    async def receivable(self, tenant: str) -> Decimal:
        return await self.queries.balance(f"tenant:{tenant}:receivable")


def billing(grace: timedelta = timedelta(minutes=15)) -> Billing:
    clock = ManualClock(datetime(2025, 1, 20, tzinfo=UTC))
    store = InMemoryEventStore(clock=clock)
    uow = InMemoryUnitOfWork(store, "billing.events", clock)
    return Billing(BillingService(BOOK, Calendar(), grace), uow, InMemoryBillingQueries(uow), clock)


def usage(
    n: int,
    *,
    job: str = "job-1",
    node: str = "n-east",
    tenant: str = "acme",
    start: datetime = JAN,
    seconds: int = 60,
) -> Usage:
    """Usage event `n`: 100 H200 CU for `seconds` (so 60 s cost 6.00 at 3.60 per CU-hour)."""
    return Usage(
        event_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"usage/{n}")),
        tenant=tenant,
        job_id=job,
        task_id=f"{job}/t0",
        node_id=node,
        window_start=start,
        window_end=start + timedelta(seconds=seconds),
        cu_seconds=MappingProxyType({"h200": Decimal(100 * seconds)}),
    )
