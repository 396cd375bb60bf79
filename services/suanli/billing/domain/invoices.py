"""Invoices: one per tenant and billing period, totals per device class, late usage as adjustment lines."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from suanli.billing.domain import ids
from suanli.billing.domain.periods import Period
from suanli.billing.domain.rating import CU_HOURS_QUANTUM, SECONDS_PER_HOUR

CU_HOUR_UNIT = "CU-h"


@dataclass(frozen=True, slots=True)
class ChargeTotal:
    """Charges of one billing period summed by device class and the period the usage happened in."""

    device_class: str
    usage_period: Period
    cu_seconds: Decimal
    amount: Decimal


@dataclass(frozen=True, slots=True)
class InvoiceLine:
    device_class: str
    description: str
    cu_hours: Decimal
    amount: Decimal
    adjustment_of: str | None = None  # label of the earlier period whose late usage this is

    @property
    def unit(self) -> str:
        return CU_HOUR_UNIT


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asked, as their verified token names them (subject, its tenant, the token's id)."""

    subject: str
    tenant: str
    token_id: str


@dataclass(frozen=True, slots=True)
class Closing:
    """How a period was closed: on request (a ClosePeriod call) or on schedule (after the grace).

    ``caller`` is the requester when billing runs with authentication; None on schedule or without it.
    """

    requested: bool
    caller: Caller | None = None

    @property
    def how(self) -> str:
        """The ``closed_by`` of the InvoiceIssued it is recorded with."""
        return "request" if self.requested else "schedule"


ON_SCHEDULE = Closing(requested=False)


@dataclass(frozen=True, slots=True)
class Invoice:
    invoice_id: str
    tenant: str
    period: Period
    currency: str
    lines: tuple[InvoiceLine, ...]
    issued_at: datetime

    @property
    def total(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal(0))


def build_invoice(
    tenant: str, period: Period, currency: str, totals: Iterable[ChargeTotal], issued_at: datetime
) -> Invoice:
    """This period's usage first, by device class; then adjustments for earlier periods, oldest first."""
    lines = []
    for t in sorted(totals, key=lambda t: (t.usage_period != period, t.usage_period.start, t.device_class)):
        late = t.usage_period != period
        description = f"{t.device_class} compute"
        if late:
            description = f"adjustment: late {t.device_class} usage of {t.usage_period.label}"
        lines.append(
            InvoiceLine(
                device_class=t.device_class,
                description=description,
                cu_hours=(t.cu_seconds / SECONDS_PER_HOUR).quantize(CU_HOURS_QUANTUM),
                amount=t.amount,
                adjustment_of=t.usage_period.label if late else None,
            )
        )
    return Invoice(ids.invoice_id(tenant, period.start), tenant, period, currency, tuple(lines), issued_at)
