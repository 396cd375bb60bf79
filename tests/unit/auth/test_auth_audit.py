"""Which recorded events the audit lists and how it names their caller: the serving service's label, the
commands that are nobody's (autoscaling, scheduled closes), the target's tenant carried forward."""

from __future__ import annotations

import uuid
from typing import Any

from suanli.auth.audit import UNAUTHENTICATED, AuditEntry, read_entries
from suanli.contracts import default_registry, encode, sample_records
from suanli.eventstore import InMemoryEventStore, NewEvent


def _record(event: str, **fields: Any) -> dict[str, Any]:
    return {**sample_records(default_registry().current(event))[0], **fields}


async def _audited(*events: tuple[str, dict[str, Any]]) -> list[AuditEntry]:
    store = InMemoryEventStore()
    for n, (name, record) in enumerate(events):
        await store.append(f"s-{n}", 0, [NewEvent(uuid.uuid4(), name, encode(name, record))])
    return await read_entries(store, "test")


def _who(entry: AuditEntry) -> tuple[str, str, str]:
    return entry.subject, entry.tenant, entry.token_id


async def test_serving_labels_name_subject_tenant_and_token() -> None:
    created = _record("ServiceCreated", service_id="svc-1", tenant="acme", principal="alice@acme#tok-1")
    manual = {"reason": "manual", "from_replicas": 1, "to_replicas": 3}
    entries = await _audited(
        ("ServiceCreated", created),
        ("ServiceScaled", _record("ServiceScaled", service_id="svc-1", principal="ops#tok-2", **manual)),
        ("ServiceDeleted", _record("ServiceDeleted", service_id="svc-1", principal="")),
    )
    assert [(e.action, _who(e), e.target_tenant) for e in entries] == [
        ("create service", ("alice", "acme", "tok-1"), "acme"),
        ("scale service", ("ops", "", "tok-2"), "acme"),  # the tenant the creation named
        ("delete service", (UNAUTHENTICATED, "", ""), "acme"),
    ]
    assert entries[1].detail == "1 -> 3 replicas"


async def test_commands_of_no_caller_are_not_listed() -> None:
    scaled = {"service_id": "svc-1", "principal": "", "from_replicas": 1, "to_replicas": 2}
    request = _record("InvoiceIssued", closed_by="request", principal=None, tenant="acme")
    entries = await _audited(
        ("ServiceScaled", _record("ServiceScaled", reason="autoscaler", **scaled)),
        ("ServiceScaled", _record("ServiceScaled", reason="created", **scaled)),
        ("InvoiceIssued", _record("InvoiceIssued", closed_by="schedule", principal=None)),
        ("InvoiceIssued", _record("InvoiceIssued", closed_by="", principal=None)),  # v1: unknown
        ("InvoiceIssued", request),
    )
    # A close on request without authentication is listed as a gap in the trail, not hidden.
    assert [(e.action, _who(e), e.target, e.target_tenant) for e in entries] == [
        ("close period", (UNAUTHENTICATED, "", ""), request["invoice_id"], "acme")
    ]
