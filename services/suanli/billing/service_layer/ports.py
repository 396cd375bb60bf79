"""What the use cases need from storage: one unit of work = one transaction, serialised with other writers.

The PostgreSQL adapter (`suanli.billing.adapters.postgres`) is the implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from suanli.billing.domain.invoices import ChargeTotal, Invoice
from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.domain.periods import Period
from suanli.billing.domain.usage import JobTerms, Usage


class LedgerUnit(Protocol):
    async def job_terms(self, job_id: str) -> JobTerms | None: ...

    async def record_job_terms(self, job_id: str, tenant: str, terms: JobTerms) -> None: ...

    async def node_region(self, node_id: str) -> str | None: ...

    async def record_node_region(self, node_id: str, region: str) -> None: ...

    async def park(self, usage: Usage) -> None: ...

    async def parked(self, *, job_id: str | None = None, node_id: str | None = None) -> list[Usage]: ...

    async def unpark(self, usage_event_id: str) -> None: ...

    async def claim_usage(self, usage_event_id: str) -> bool:
        """Mark the usage event rated; False if it already was (then nothing else may be written)."""
        ...

    async def invoiced(self, tenant: str, period: Period) -> bool: ...

    async def record_charges(self, charges: Sequence[BilledCharge]) -> None:
        """Charges, their balanced ledger entries and their ChargeRecorded events (outbox)."""
        ...

    async def billed_charge(self, charge_id: str) -> BilledCharge | None: ...

    async def reversed(self, charge_id: str) -> bool: ...

    async def charge_totals(self, tenant: str, billing_period: Period) -> list[ChargeTotal]: ...

    async def invoice(self, tenant: str, period: Period) -> Invoice | None: ...

    async def record_invoice(self, invoice: Invoice) -> None:
        """Invoice rows and the InvoiceIssued event (outbox)."""
        ...

    async def unbilled_periods(self, ended_by: datetime) -> list[tuple[str, datetime]]:
        """(tenant, billing period start) with charges, no invoice and a period end <= `ended_by`."""
        ...
