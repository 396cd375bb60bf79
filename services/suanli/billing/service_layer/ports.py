"""What the use cases need from storage, one small port per role, grouped by a unit of work.

A unit of work is one transaction, serialised with every other writer of the same store: the four ports
of a `LedgerUnit` read and write inside it, and the consumed offset (when tracked) commits with them.
Each port has an in-memory adapter (`suanli.billing.adapters.memory`) and a PostgreSQL adapter
(`suanli.billing.adapters.postgres`), held to one contract suite per port (tests/contract/billing).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from suanli.billing.domain.invoices import ON_SCHEDULE, ChargeTotal, Closing, Invoice
from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.domain.periods import Period
from suanli.billing.domain.usage import JobTerms, Usage
from suanli.eventstore import TrackingBatch


class LedgerConflict(Exception):
    """A write the ledger's invariants refuse (the use cases never ask for one: this is the backstop).

    A charge recorded twice, reversed twice, recorded for usage not claimed or billed into an invoiced
    period; an invoice issued twice.
    """


class Terms(Protocol):
    """The facts usage is priced by, learnt from other services: a job's terms and a node's region."""

    async def job_terms(self, job_id: str) -> JobTerms | None: ...

    async def record_job_terms(self, job_id: str, tenant: str, terms: JobTerms) -> None:
        """The first terms of a job stay: a job is submitted once, a repeat must not re-price anything."""
        ...

    async def node_region(self, node_id: str) -> str | None: ...

    async def job_terms_of(self, job_ids: Collection[str]) -> dict[str, JobTerms]:
        """`job_terms` of several jobs at once: those that have terms, by job id."""
        ...

    async def record_job_terms_many(self, jobs: Sequence[tuple[str, str, JobTerms]]) -> None:
        """`record_job_terms` for each (job id, tenant, terms) in order: a repeated job keeps its first."""
        ...

    async def node_regions_of(self, node_ids: Collection[str]) -> dict[str, str]:
        """`node_region` of several nodes at once: those with a region, by node id."""
        ...

    async def record_node_region(self, node_id: str, region: str) -> None:
        """The latest region of a node replaces the one before."""
        ...


class Parking(Protocol):
    """Usage that arrived before its job's terms or its node's region, kept until they are known."""

    async def park(self, usage: Usage) -> None:
        """Keep `usage` (once: parking the same usage event again changes nothing)."""
        ...

    async def parked(self, *, job_id: str | None = None, node_id: str | None = None) -> list[Usage]:
        """Usage parked for the job or the node, oldest parked first."""
        ...

    async def parked_for_jobs(self, job_ids: Collection[str]) -> list[Usage]:
        """Usage parked for any of the jobs, oldest parked first."""
        ...

    async def unpark(self, usage_event_id: str) -> None: ...

    async def unpark_many(self, usage_event_ids: Collection[str]) -> None: ...


class Ledger(Protocol):
    """Charges with their balanced entries and ChargeRecorded events; append-only."""

    async def claim_usage(self, usage_event_id: str) -> bool:
        """Mark the usage event rated; False if it already was (then nothing else may be written)."""
        ...

    async def claim_usages(self, usage_event_ids: Sequence[str]) -> set[str]:
        """`claim_usage` for each: the ids claimed now (one repeated in ``usage_event_ids`` once)."""
        ...

    async def record_charges(
        self, charges: Sequence[BilledCharge], traces: Mapping[str, str] | None = None
    ) -> None:
        """Charges, their balanced ledger entries and their ChargeRecorded events (outbox).

        ``traces``: the W3C traceparent each charge's event continues, by charge id (a batch records the
        charges of several traces at once); a charge not in it continues the span active now.

        Raises `LedgerConflict` for a charge id recorded before, a second reversal of a charge, or a
        charge billed into a period already invoiced.
        """
        ...

    async def billed_charge(self, charge_id: str) -> BilledCharge | None: ...

    async def reversed(self, charge_id: str) -> bool: ...

    async def charge_totals(self, tenant: str, billing_period: Period) -> list[ChargeTotal]:
        """The tenant's charges billed in the period, summed by device class and usage period."""
        ...


class Invoices(Protocol):
    """Issued invoices (final once issued) and the periods still waiting for one."""

    async def invoiced(self, tenant: str, period: Period) -> bool: ...

    async def invoiced_of(self, keys: Collection[tuple[str, Period]]) -> set[tuple[str, Period]]:
        """`invoiced` for several (tenant, period) at once: those invoiced."""
        ...

    async def invoice(self, tenant: str, period: Period) -> Invoice | None: ...

    async def record_invoice(self, invoice: Invoice, closing: Closing = ON_SCHEDULE) -> None:
        """Invoice rows and the InvoiceIssued event (outbox) saying how it was closed; `LedgerConflict` if
        already issued."""
        ...

    async def unbilled_periods(self, ended_by: datetime) -> list[tuple[str, datetime]]:
        """(tenant, billing period start) with charges, no invoice and a period end <= `ended_by`.

        Ordered by period start, then tenant.
        """
        ...


@dataclass(frozen=True, slots=True)
class LedgerUnit:
    """The ports of one unit of work, all inside the same transaction."""

    terms: Terms
    parking: Parking
    ledger: Ledger
    invoices: Invoices


@dataclass(frozen=True, slots=True)
class TrackedBatch:
    """A group commit: consumed records claimed one by one, all their effects through one unit.

    Nothing commits until the batch's block ends; if it raises, every claim and effect rolls back.
    """

    unit: LedgerUnit
    tracking: TrackingBatch


class UnitOfWork(Protocol):
    """Opens units of work: tracked (a consumed record's offset commits with the effect) or plain."""

    def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AbstractAsyncContextManager[LedgerUnit]:
        """Raises `suanli.eventstore.AlreadyProcessed` (nothing runs) when the record was applied.

        With `event_id` the record is recognised by its id, which stays right after a broker restart that
        numbers offsets from 0 again; without it, by its offset.
        """
        ...

    def tracked_batch(self, group: str) -> AbstractAsyncContextManager[TrackedBatch]:
        """One unit for several consumed records (`TrackedBatch`): one transaction and one writer lock."""
        ...

    def begin(self) -> AbstractAsyncContextManager[LedgerUnit]: ...


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Charges whose usage fell in a period, summed by device class and region."""

    device_class: str
    region: str
    cu_seconds: Decimal
    amount: Decimal
    charges: int


@dataclass(frozen=True, slots=True)
class ChargePage:
    charges: list[BilledCharge]
    next_after: int | None  # seq of the last charge when more may follow


class BillingQueries(Protocol):
    """The read side the API answers from: committed rows, no lock."""

    async def usage(self, tenant: str, period: Period) -> list[UsageRow]: ...

    async def charges(
        self,
        tenant: str,
        *,
        billing_period: Period | None = None,
        job_id: str | None = None,
        after: int = 0,
        limit: int = 100,
        newest_first: bool = False,
    ) -> ChargePage:
        """Charges in the order they were recorded (seq), or the reverse with ``newest_first``, from past
        the charge of seq ``after`` on (0: from the first)."""
        ...

    async def invoice(self, tenant: str, period: Period) -> Invoice | None: ...

    async def latest_invoice(self, tenant: str) -> Invoice | None:
        """The tenant's invoice of the latest period invoiced so far."""
        ...

    async def known_tenant(self, tenant: str) -> bool:
        """Whether billing holds anything of the tenant: a submitted job's terms, a charge or an invoice."""
        ...

    async def balance(self, account: str) -> Decimal: ...
