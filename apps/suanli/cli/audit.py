"""`suanli audit`: who did what — jobs, queues, priority classes, inference services, period closes
and tokens.

Reads the systems of record in PostgreSQL (the scheduler's, serving's and billing's event stores and the
token ledger), not a service: the trail is there even when the services are down (docs/security.md,
"Audit").
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

import typer

from suanli.auth.audit import AuditEntry, read_entries, select
from suanli.auth.ledger import DEFAULT_SCHEMA as AUTH_SCHEMA
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.cli import paging
from suanli.cli.client import EXIT_UNREACHABLE, EXIT_USAGE, Failure, fail
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows
from suanli.eventstore import PostgresEventStore
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.serving.entrypoints.settings import ServingSettings

# The services' own defaults, so that the audit reads where they write unless told otherwise.
SCHEDULING_SCHEMA: str = SchedulingSettings.model_fields["store_schema"].default
SERVING_SCHEMA: str = ServingSettings.model_fields["db_schema"].default
BILLING_SCHEMA: str = BillingSettings.model_fields["db_schema"].default

COLUMNS = ("time", "subject", "tenant", "token", "action", "target", "target_tenant", "detail")


def _time(text: str | None, option: str) -> datetime | None:
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{option} {text!r}: an ISO time like 2026-12-01 or 2026-12-01T10:00"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


async def _entries(dsn: str, schemas: tuple[str, ...]) -> list[AuditEntry]:
    async def read(schema: str) -> list[AuditEntry]:
        async with await PostgresEventStore.connect(dsn, schema=schema, max_size=1) as store:
            return await read_entries(store, schema)

    # The stores side by side: one listing waits for the slowest, not for the sum of them.
    return [entry for found in await asyncio.gather(*map(read, schemas)) for entry in found]


def audit(
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="Only this tenant (the caller's or the target's).")
    ] = "",
    subject: Annotated[str, typer.Option("--subject", "-s", help="Only this subject.")] = "",
    since: Annotated[
        str | None, typer.Option("--since", help="From this ISO time (UTC unless given).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Before this ISO time.")] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="At most this many entries (0: all).")
    ] = 200,
    continue_token: paging.ContinueOption = "",
    dsn: Annotated[
        str, typer.Option("--dsn", envvar="SUANLI_PG_DSN", help="The platform's PostgreSQL.")
    ] = "",
    scheduling_schema: Annotated[
        str, typer.Option("--scheduling-schema", help="The scheduler's event store schema.")
    ] = SCHEDULING_SCHEMA,
    serving_schema: Annotated[
        str,
        typer.Option(
            "--serving-schema", envvar="SUANLI_SERVING_SCHEMA", help="The serving service's store schema."
        ),
    ] = SERVING_SCHEMA,
    billing_schema: Annotated[
        str,
        typer.Option("--billing-schema", envvar="SUANLI_BILLING_SCHEMA", help="Billing's store schema."),
    ] = BILLING_SCHEMA,
    auth_schema: Annotated[
        str, typer.Option("--auth-schema", help="The token ledger's schema.")
    ] = AUTH_SCHEMA,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
) -> None:
    """Who did what, newest first: jobs submitted and cancelled, queues and priority classes changed,
    inference services created, scaled and deleted, periods closed, tokens issued and revoked.

    When more are left, stderr says how to go on: --continue TOKEN lists the next ones.
    """
    if not dsn:
        raise fail(Failure("no database: pass --dsn or set SUANLI_PG_DSN", EXIT_USAGE))
    window = _time(since, "--since"), _time(until, "--until")
    schemas = (scheduling_schema, serving_schema, billing_schema, auth_schema)
    try:
        found = asyncio.run(_entries(dsn, schemas))
    except OSError as exc:
        raise fail(Failure(f"cannot reach PostgreSQL: {exc}", EXIT_UNREACHABLE)) from None
    chosen = select(found, tenant=tenant, subject=subject, since=window[0], until=window[1])
    rows, token = paging.newest_first(chosen, _key, limit=limit, token=continue_token)
    items = [_item(e) for e in rows]
    table = Rows(
        COLUMNS,
        [[item[c] or "-" for c in COLUMNS] for item in items],
        title=f"audit: {len(rows)} entries (times UTC)",
        wrap=frozenset({"detail"}),
        kind="entry",
        names=[f"{item['time']}/{item['action']}" for item in items],
        items=items,
        key="entries",
    )
    emit_rows(output, {"entries": items}, table, no_headers=no_headers, sort_by=sort_by)
    paging.more(len(rows), token)


def _key(entry: AuditEntry) -> paging.Key:
    return paging.micros(entry.at), entry.store, entry.position


def _item(entry: AuditEntry) -> dict[str, str]:
    return {
        "time": f"{entry.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}",
        "subject": entry.subject,
        "tenant": entry.tenant,
        "token": entry.token_id,
        "action": entry.action,
        "target": entry.target,
        "target_tenant": entry.target_tenant,
        "detail": entry.detail,
    }
