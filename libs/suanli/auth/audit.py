"""Who did what: command events that name their principal, as one time-ordered list.

Read from the systems of record (event stores in PostgreSQL): the scheduler's ``JobSubmitted`` (v4+),
``JobCancelled`` (v2+), queue and priority-class changes carry the caller's ``principal``; the serving
service's ``ServiceCreated`` / ``ServiceScaled`` / ``ServiceDeleted`` its label (``subject@tenant#token``);
billing's ``InvoiceIssued`` (v2+) says whether a ``ClosePeriod`` call closed the period and who made it;
the token ledger's ``TokenIssued`` and ``TokenRevoked`` name who issued or revoked. Events written without
authentication appear with the subject ``(unauthenticated)`` so that a gap in the trail is visible, not
hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from suanli.auth.principal import tenant_of_queue
from suanli.contracts import decode
from suanli.eventstore import EventStore

UNAUTHENTICATED = "(unauthenticated)"
READ_BATCH = 1000


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One command: when, who (subject, their tenant, their token), what, on what and in which tenant.

    ``store`` and ``position`` say where it is recorded (the store's name, the event's position there):
    they set apart commands of the same instant.
    """

    at: datetime
    subject: str
    tenant: str
    token_id: str
    action: str
    target: str
    target_tenant: str
    detail: str
    store: str = ""
    position: int = 0


def _by(record: Mapping[str, Any]) -> tuple[str, str, str]:
    principal = record.get("principal")
    if not principal:
        return UNAUTHENTICATED, "", ""
    return principal["subject"], principal["tenant"], principal["token_id"]


def _by_label(record: Mapping[str, Any]) -> tuple[str, str, str]:
    """The serving service's principal, its ``Principal.label`` text: ``subject@tenant#token``.

    The tenant is what follows the last ``@``, so a subject with an ``@`` (an e-mail address) reads right
    only when the token names a tenant; the label omits the tenant of platform-wide tokens.
    """
    label = record["principal"]
    if not label:
        return UNAUTHENTICATED, "", ""
    who, _, token_id = label.rpartition("#")
    subject, at, tenant = who.rpartition("@")
    return (subject, tenant, token_id) if at else (who, "", token_id)


def _submitted(r: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(
        r["occurred_at"], *_by(r), "submit job", r["job_id"], r["tenant"], f"queue {r['queue']}"
    )


def _cancelled(r: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(r["occurred_at"], *_by(r), "cancel job", r["job_id"], "", r.get("reason") or "")


def _issued(r: Mapping[str, Any]) -> AuditEntry:
    roles = ",".join(r["roles"])
    who = f"{r['subject']}@{r['tenant']}" if r["tenant"] else r["subject"]
    by = r["issued_by"] or UNAUTHENTICATED
    until = f"{r['expires_at']:%Y-%m-%d %H:%M}"
    return AuditEntry(
        r["occurred_at"],
        by,
        "",
        "",
        "issue token",
        r["token_id"],
        r["tenant"],
        f"for {who} ({roles}) until {until}",
    )


def _revoked(r: Mapping[str, Any]) -> AuditEntry:
    by = r["revoked_by"] or UNAUTHENTICATED
    return AuditEntry(r["occurred_at"], by, "", "", "revoke token", r["token_id"], "", r.get("reason") or "")


def _queue_settings(r: Mapping[str, Any]) -> str:
    quotas = ", ".join(f"{q['resource']} {q['guaranteed']}" for q in r["quotas"])
    parts = [f"cohort {r['cohort']}" if r["cohort"] else "", "stopped" if r["stopped"] else "", quotas]
    return "; ".join(p for p in parts if p)


def _queue(action: str) -> Callable[[Mapping[str, Any]], AuditEntry]:
    def entry(r: Mapping[str, Any]) -> AuditEntry:
        detail = _queue_settings(r) if "quotas" in r else ""
        return AuditEntry(r["occurred_at"], *_by(r), action, r["name"], tenant_of_queue(r["name"]), detail)

    return entry


def _priority_class(action: str) -> Callable[[Mapping[str, Any]], AuditEntry]:
    def entry(r: Mapping[str, Any]) -> AuditEntry:
        detail = f"value {r['value']}" if "value" in r else ""
        return AuditEntry(r["occurred_at"], *_by(r), action, r["name"], "", detail)

    return entry


def _service_created(r: Mapping[str, Any]) -> AuditEntry:
    detail = f"{r['name']}: model {r['model']}, queue {r['queue']}"
    return AuditEntry(r["occurred_at"], *_by_label(r), "create service", r["service_id"], r["tenant"], detail)


def _service_scaled(r: Mapping[str, Any]) -> AuditEntry | None:
    # Only a caller's scale is a command: creation's first count, the autoscaler and replacements are not.
    if r["reason"] != "manual":
        return None
    detail = f"{r['from_replicas']} -> {r['to_replicas']} replicas"
    return AuditEntry(r["occurred_at"], *_by_label(r), "scale service", r["service_id"], "", detail)


def _service_deleted(r: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(r["occurred_at"], *_by_label(r), "delete service", r["service_id"], "", "")


def _period_closed(r: Mapping[str, Any]) -> AuditEntry | None:
    # The closer's invoices (closed_by "schedule") are nobody's command; before v2 nothing says which.
    if r["closed_by"] != "request":
        return None
    period = f"{r['period_start']:%Y-%m-%d %H:%M} - {r['period_end']:%Y-%m-%d %H:%M}"
    detail = f"period {period}, total {r['total']} {r['currency']}"
    return AuditEntry(r["occurred_at"], *_by(r), "close period", r["invoice_id"], r["tenant"], detail)


AUDITED: Mapping[str, Callable[[Mapping[str, Any]], AuditEntry | None]] = {
    "JobSubmitted": _submitted,
    "JobCancelled": _cancelled,
    "QueueCreated": _queue("create queue"),
    "QueueUpdated": _queue("update queue"),
    "QueueDeleted": _queue("delete queue"),
    "PriorityClassDefined": _priority_class("define priority class"),
    "PriorityClassDeleted": _priority_class("delete priority class"),
    "TokenIssued": _issued,
    "TokenRevoked": _revoked,
    "ServiceCreated": _service_created,
    "ServiceScaled": _service_scaled,
    "ServiceDeleted": _service_deleted,
    "InvoiceIssued": _period_closed,
}


async def read_entries(store: EventStore, name: str = "") -> list[AuditEntry]:
    """Every audited event of ``store`` (recorded as in the store called ``name``), in commit order.

    An entry whose event does not name the target's tenant (a cancelled job, a scaled service, a revoked
    token) gets the tenant an earlier entry of the same store named for that target.
    """
    entries: list[AuditEntry] = []
    tenants: dict[str, str] = {}
    after = 0
    while batch := await store.read_all(after, READ_BATCH):
        after = batch[-1].position
        for stored in batch:
            if stored.event_name not in AUDITED:
                continue
            event, record = decode(stored.payload)
            entry = AUDITED[event](record)
            if entry is None:
                continue
            if entry.target_tenant:
                tenants[entry.target] = entry.target_tenant
            target_tenant = entry.target_tenant or tenants.get(entry.target, "")
            entries.append(replace(entry, target_tenant=target_tenant, store=name, position=stored.position))
    return entries


def select(
    entries: Iterable[AuditEntry],
    *,
    tenant: str = "",
    subject: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[AuditEntry]:
    """Entries matching every filter given (tenant: the caller's or the target's), newest first.

    Newest by time, then store and position, the order ``suanli audit`` pages in.
    """
    return sorted(
        (
            e
            for e in entries
            if (not tenant or tenant in (e.tenant, e.target_tenant))
            and (not subject or e.subject == subject)
            and (since is None or e.at >= since)
            and (until is None or e.at < until)
        ),
        key=lambda e: (e.at, e.store, e.position),
        reverse=True,
    )
