"""Contract records (Avro dicts from `suanli.contracts`) to and from billing's domain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from suanli.billing.adapters.announce import Announcer
from suanli.billing.domain import ids
from suanli.billing.domain.errors import InvalidUsage
from suanli.billing.domain.invoices import CU_HOUR_UNIT, Closing, Invoice
from suanli.billing.domain.ledger import BilledCharge, entries_for
from suanli.billing.domain.usage import JobTerms, Usage, cu_seconds_from_float
from suanli.contracts import new_envelope

PRODUCER = "billing"


def usage_from_record(record: Mapping[str, Any]) -> Usage:
    """A UsageMetered record as a Usage; InvalidUsage names what is wrong."""
    try:
        cu = record["cu_seconds"]
        return Usage(
            event_id=str(record["event_id"]),
            tenant=record["tenant"],
            job_id=record["job_id"],
            task_id=record["task_id"],
            node_id=record["node_id"],
            window_start=record["window_start"],
            window_end=record["window_end"],
            cu_seconds=MappingProxyType({k: cu_seconds_from_float(v) for k, v in cu.items()}),
        )
    except KeyError as exc:
        raise InvalidUsage(f"UsageMetered without {exc.args[0]}") from None


def terms_from_job_submitted(record: Mapping[str, Any]) -> tuple[str, str, JobTerms]:
    """(job id, tenant, terms) of a JobSubmitted record."""
    return record["job_id"], record["tenant"], JobTerms(int(record["priority"]), bool(record["preemptible"]))


def usage_to_json(usage: Usage) -> dict[str, Any]:
    return {
        "event_id": usage.event_id,
        "tenant": usage.tenant,
        "job_id": usage.job_id,
        "task_id": usage.task_id,
        "node_id": usage.node_id,
        "window_start": usage.window_start.isoformat(),
        "window_end": usage.window_end.isoformat(),
        # Decimal text, so a parked usage comes back exactly as it went in.
        "cu_seconds": {k: str(v) for k, v in usage.cu_seconds.items()},
    }


def usage_from_json(data: Mapping[str, Any]) -> Usage:
    return Usage(
        event_id=data["event_id"],
        tenant=data["tenant"],
        job_id=data["job_id"],
        task_id=data["task_id"],
        node_id=data["node_id"],
        window_start=datetime.fromisoformat(data["window_start"]),
        window_end=datetime.fromisoformat(data["window_end"]),
        cu_seconds=MappingProxyType({k: Decimal(v) for k, v in data["cu_seconds"].items()}),
    )


def charge_recorded(billed: BilledCharge, occurred_at: datetime) -> dict[str, Any]:
    charge = billed.charge
    debit, credit = entries_for(charge)
    return {
        **new_envelope(
            PRODUCER,
            charge.tenant,
            event_id=ids.event_id("ChargeRecorded", charge.charge_id),
            occurred_at=occurred_at,
        ),
        "charge_id": charge.charge_id,
        "tenant": charge.tenant,
        "debit_account": debit.account,
        "credit_account": credit.account,
        "amount": charge.amount,
        "currency": charge.currency,
        "quantity": charge.cu_hours,
        "unit": CU_HOUR_UNIT,
        "unit_price": charge.unit_price,
        "usage_event_id": charge.usage_event_id,
        "job_id": charge.job_id,
        "task_id": charge.task_id,
    }


def charges_recorded(
    charges: Sequence[BilledCharge], occurred_at: datetime
) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The ChargeRecorded records of `charges` by tenant (each tenant's stream gets one append)."""
    by_tenant: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for billed in charges:
        by_tenant.setdefault(billed.charge.tenant, []).append(
            ("ChargeRecorded", charge_recorded(billed, occurred_at))
        )
    return by_tenant


async def announce_charges(
    announcer: Announcer,
    charges: Sequence[BilledCharge],
    occurred_at: datetime,
    traces: Mapping[str, str] | None = None,
) -> None:
    """Each tenant's ChargeRecorded events appended to its stream, each continuing its charge's trace
    (``traces``, by charge id; the span active now for a charge not in it)."""
    by_tenant = charges_recorded(charges, occurred_at)
    traced = (
        None
        if traces is None
        else {t: [traces.get(r["charge_id"]) for _, r in events] for t, events in by_tenant.items()}
    )
    await announcer.announce_many(by_tenant, traced)


def invoice_issued(invoice: Invoice, closing: Closing) -> dict[str, Any]:
    caller = closing.caller
    return {
        **new_envelope(
            PRODUCER,
            invoice.tenant,
            event_id=ids.event_id("InvoiceIssued", invoice.invoice_id),
            occurred_at=invoice.issued_at,
        ),
        "invoice_id": invoice.invoice_id,
        "tenant": invoice.tenant,
        "period_start": invoice.period.start,
        "period_end": invoice.period.end,
        "currency": invoice.currency,
        "total": invoice.total,
        "lines": [
            {
                "description": line.description,
                "quantity": line.cu_hours,
                "unit": line.unit,
                "amount": line.amount,
            }
            for line in invoice.lines
        ],
        "due_at": None,
        "closed_by": closing.how,
        "principal": None
        if caller is None
        else {"subject": caller.subject, "tenant": caller.tenant, "token_id": caller.token_id},
    }
