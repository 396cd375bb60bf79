"""`suanli outbox parked|unpark`: outbox rows the relay set aside because the broker refused them.

Reads the services' event-store schemas directly (PostgreSQL is the system of record); it never
migrates a schema, so a schema a service has not created yet is reported, not made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer

from suanli.cli import paging
from suanli.cli.client import EXIT_UNREACHABLE, EXIT_USAGE, Failure, fail
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows, stdout
from suanli.eventstore.postgres import (
    newest_parked_outbox_rows,
    outbox_parking_ready,
    unpark_outbox_rows,
)
from suanli.eventstore.values import ParkedRow
from suanli.settings import PG_DSN_ENV

T = TypeVar("T")
LAST_ID = 2**63 - 1  # past every outbox id (bigint)

# The schemas of the services that write an outbox (scheduling's store, billing's ledger).
SERVICE_SCHEMAS = ("scheduling", "billing")

app = typer.Typer(
    help="Outbox rows the relay parked (refused by the broker) and putting them back.", no_args_is_help=True
)

Dsn = Annotated[str, typer.Option("--dsn", envvar=PG_DSN_ENV, help=f"PostgreSQL DSN (env {PG_DSN_ENV}).")]
Schemas = Annotated[
    list[str] | None,
    typer.Option("--schema", help="Event-store schema (repeatable); default: scheduling and billing."),
]


def with_connection(dsn: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """``work`` on one connection to ``dsn``; an unreachable or refusing server is a clean CLI failure."""
    import asyncpg

    async def main() -> T:
        conn = await asyncpg.connect(dsn)
        try:
            return await work(conn)
        finally:
            await conn.close()

    try:
        return asyncio.run(main())
    except ValueError as exc:  # a schema name that is not a plain identifier
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise fail(Failure(f"PostgreSQL: {exc!r}", EXIT_UNREACHABLE)) from None


def _parked(entry: tuple[str, ParkedRow]) -> paging.Key:
    schema, row = entry
    return paging.micros(row.parked_at), schema, row.id


def _before(schema: str, after: paging.Key | None) -> tuple[datetime, int] | None:
    """Where ``schema``'s rows resume after the row of key ``after``: the listing orders rows parked at
    the same instant by schema, so a schema named before the last row's has all of that instant left,
    one named after it none."""
    if after is None:
        return None
    at, last_schema, last_id = after
    assert isinstance(at, int) and isinstance(last_id, int)
    if schema == last_schema:
        return paging.instant(at), last_id
    return paging.instant(at), LAST_ID if schema < str(last_schema) else 0


def _row_data(schema: str, row: ParkedRow) -> dict[str, Any]:
    return {
        "schema": schema,
        "id": row.id,
        "topic": row.topic,
        "key": None if row.key is None else row.key.decode("utf-8", errors="replace"),
        "event_name": row.event_name,
        "size": row.size,
        "attempts": row.attempts,
        "reason": row.reason,
        "created_at": row.created_at.isoformat(),
        "parked_at": row.parked_at.isoformat(),
    }


@app.command()
def parked(
    schema: Schemas = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many (0: all).")] = 100,
    continue_token: paging.ContinueOption = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    dsn: Dsn = "",
) -> None:
    """Rows parked in the schemas' outboxes, newest parked first: topic, size, attempts and the broker's
    reason.

    When more are left, stderr says how to go on: --continue TOKEN lists the next ones.
    """
    schemas = schema or list(SERVICE_SCHEMAS)
    after = paging.cursor_key(continue_token, (0, "", 0)) if continue_token else None

    async def work(conn: Any) -> tuple[list[tuple[str, ParkedRow]], list[str]]:
        rows: list[tuple[str, ParkedRow]] = []
        missing: list[str] = []
        for name in schemas:
            if not await outbox_parking_ready(conn, name):
                missing.append(name)
                continue
            # One more than the limit from each schema: enough to know whether any row is left after it.
            bound = _before(name, after)
            found = await newest_parked_outbox_rows(conn, name, limit + 1 if limit else None, bound)
            rows += [(name, r) for r in found]
        return rows, missing

    found, missing = with_connection(dsn, work)
    shown, token = paging.newest_first(found, _parked, limit=limit, token=continue_token)
    rows = [_row_data(name, r) for name, r in shown]
    listed = Rows(
        ("schema", "id", "topic", "event", "size", "attempts", "parked_at", "reason"),
        [
            (
                r["schema"],
                str(r["id"]),
                r["topic"],
                r["event_name"],
                str(r["size"]),
                str(r["attempts"]),
                r["parked_at"],
                r["reason"],
            )
            for r in rows
        ],
        title="parked outbox rows",
        right=frozenset({"id", "size", "attempts"}),
        wrap=frozenset({"reason"}),
        names=[f"{r['schema']}/{r['id']}" for r in rows],
        kind="outbox",
        items=rows,
        key="parked",
    )
    data = {"parked": rows, "schemas_without_outbox": missing}
    emit_rows(output, data, listed, no_headers=no_headers, sort_by=sort_by)
    paging.more(len(shown), token)
    for name in missing:
        typer.echo(
            f"schema {name}: no outbox with parking here (service not started or not migrated)", err=True
        )


@app.command()
def unpark(
    ids: Annotated[list[int], typer.Argument(help="Ids of parked rows (from `suanli outbox parked`).")],
    schema: Annotated[str, typer.Option("--schema", help="The schema the rows are in.")] = "scheduling",
    dsn: Dsn = "",
) -> None:
    """Put parked rows back in line (after raising the broker's limit, say); the relay sends them next.

    They are sent after the rows that went on meanwhile, so a consumer may see them out of order.
    """

    async def work(conn: Any) -> list[int]:
        return await unpark_outbox_rows(conn, schema, ids)

    back = with_connection(dsn, work)
    stdout.print(f"{len(back)} row(s) back in line in {schema}: {', '.join(map(str, back)) or '-'}")
    if len(back) != len(set(ids)):
        raise fail(
            Failure(f"not parked: {', '.join(str(i) for i in sorted(set(ids) - set(back)))}", EXIT_USAGE)
        )
