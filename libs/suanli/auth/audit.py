"""Who did what: command events that name their principal, as one time-ordered list.

Read from the systems of record (event stores in PostgreSQL): the scheduler's ``JobSubmitted`` (v4+) and
``JobCancelled`` (v2+) carry the caller's ``principal``; the token ledger's ``TokenIssued`` and
``TokenRevoked`` name who issued or revoked. Events written without authentication appear with the
subject ``(unauthenticated)`` so that a gap in the trail is visible, not hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

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


AUDITED: Mapping[str, Callable[[Mapping[str, Any]], AuditEntry]] = {
    "JobSubmitted": _submitted,
    "JobCancelled": _cancelled,
    "TokenIssued": _issued,
    "TokenRevoked": _revoked,
}


async def read_entries(store: EventStore, name: str = "") -> list[AuditEntry]:
    """Every audited event of ``store`` (recorded as in the store called ``name``), in commit order.

    A cancelled job's tenant is filled from its ``JobSubmitted`` (same store, earlier position).
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
            entry = replace(AUDITED[event](record), store=name, position=stored.position)
            if event == "JobSubmitted":
                tenants[entry.target] = entry.target_tenant
            elif event == "JobCancelled":
                entry = replace(entry, target_tenant=tenants.get(entry.target, ""))
            entries.append(entry)
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
