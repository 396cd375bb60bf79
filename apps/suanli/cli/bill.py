"""`suanli bill usage|charges|invoice|close`: the Billing gRPC API from the shell (rich tables or CSV)."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from suanli.cli import config
from suanli.cli.client import EXIT_USAGE, Failure, fail, rpc_failure

if TYPE_CHECKING:
    from suanli.api.billing.v1 import billing_pb2_grpc

ADDR_ENV = "SUANLI_BILLING_ADDR"
BUILTIN_ADDR = "localhost:50055"
DEFAULT_ADDR = ""  # not given: the config context's billing address, else BUILTIN_ADDR
TIMEOUT_S = 30.0

app = typer.Typer(help="Usage, charges and invoices from the billing service.", no_args_is_help=True)

Addr = Annotated[
    str,
    typer.Option(
        "--billing",
        envvar=ADDR_ENV,
        show_default=False,
        help=f"Billing gRPC address HOST:PORT (default: the config context's, else {BUILTIN_ADDR}).",
    ),
]
Tenant = Annotated[str, typer.Option("--tenant", "-t", help="Tenant.")]
PeriodOpt = Annotated[
    str, typer.Option("--period", "-p", help="YYYY-MM or YYYY-MM-DD (the period containing it).")
]
CsvOpt = Annotated[
    Path | None, typer.Option("--csv", dir_okay=False, help="Also write the rows to this CSV file.")
]


def _stub(addr: str) -> tuple[Any, billing_pb2_grpc.BillingStub]:
    from suanli.api.billing.v1 import billing_pb2_grpc

    channel = config.channel(addr)
    return channel, billing_pb2_grpc.BillingStub(channel)


def _call(addr: str, method: str, request: Any) -> Any:
    import grpc

    try:
        addr = config.server("billing", addr, BUILTIN_ADDR)
        channel, stub = _stub(addr)
    except config.ConfigError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    try:
        return getattr(stub, method)(request, timeout=TIMEOUT_S)
    except grpc.RpcError as exc:
        # The same messages and exit codes as the scheduler commands (3 refused, 4 unreachable).
        raise fail(rpc_failure(exc, addr, service="billing")) from None
    finally:
        channel.close()


def _emit(title: str, header: Sequence[str], rows: Sequence[Sequence[str]], csv_path: Path | None) -> None:
    table = Table(title=title)
    for name in header:
        table.add_column(name, justify="right" if name in _NUMERIC else "left")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    if csv_path is not None:
        with csv_path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            writer.writerows(rows)
        typer.echo(f"wrote {len(rows)} row(s) to {csv_path}")


_NUMERIC = {"cu_hours", "amount", "charges", "unit_price", "quantity"}


@app.command()
def usage(
    tenant: Tenant, period: PeriodOpt = "", billing: Addr = DEFAULT_ADDR, csv_file: CsvOpt = None
) -> None:
    """Usage of a tenant in a period, by device class and region."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    answer = _call(billing, "GetUsage", pb.GetUsageRequest(tenant=tenant, period=period))
    rows = [(r.device_class, r.region, r.cu_hours, r.amount, str(r.charges)) for r in answer.rows]
    _emit(
        f"{answer.tenant} usage {answer.period.label}: {answer.total} {answer.currency}",
        ("device_class", "region", "cu_hours", "amount", "charges"),
        rows,
        csv_file,
    )


def _pages(billing: str, request: Any, limit: int) -> Iterator[Any]:
    seen = 0
    while True:
        answer = _call(billing, "ListCharges", request)
        for charge in answer.charges:
            if limit and seen >= limit:
                return
            seen += 1
            yield charge
        if not answer.next_page_token:
            return
        request.page_token = answer.next_page_token


@app.command()
def charges(
    tenant: Tenant,
    period: Annotated[
        str, typer.Option("--period", "-p", help="Billing period (YYYY-MM); default all.")
    ] = "",
    job: Annotated[str, typer.Option("--job", help="Only this job's charges.")] = "",
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")] = 0,
    billing: Addr = DEFAULT_ADDR,
    csv_file: CsvOpt = None,
) -> None:
    """Charges of a tenant, oldest first (all pages)."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    request = pb.ListChargesRequest(tenant=tenant, period=period, job_id=job, page_size=500)
    header = (
        "charge_id",
        "job_id",
        "task_id",
        "device_class",
        "region",
        "tier",
        "window_start",
        "cu_hours",
        "unit_price",
        "amount",
        "currency",
        "billing_period",
        "adjustment",
    )
    rows = [
        (
            c.charge_id,
            c.job_id,
            c.task_id,
            c.device_class,
            c.region,
            c.tier,
            c.window_start.ToDatetime().isoformat() + "Z",
            c.cu_hours,
            c.unit_price,
            c.amount,
            c.currency,
            c.billing_period,
            "yes" if c.adjustment else "",
        )
        for c in _pages(billing, request, limit)
    ]
    _emit(f"{tenant} charges {period or '(all periods)'}", header, rows, csv_file)


def _print_invoice(answer: Any, csv_file: Path | None) -> None:
    rows = [
        (ln.device_class, ln.description, ln.quantity, ln.unit, ln.amount, ln.adjustment_of)
        for ln in answer.lines
    ]
    _emit(
        f"invoice {answer.invoice_id} {answer.tenant} {answer.period.label}: "
        f"{answer.total} {answer.currency}",
        ("device_class", "description", "quantity", "unit", "amount", "adjustment_of"),
        rows,
        csv_file,
    )


@app.command()
def invoice(tenant: Tenant, period: PeriodOpt, billing: Addr = DEFAULT_ADDR, csv_file: CsvOpt = None) -> None:
    """The issued invoice of a tenant for a period."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    _print_invoice(_call(billing, "GetInvoice", pb.GetInvoiceRequest(tenant=tenant, period=period)), csv_file)


@app.command()
def close(tenant: Tenant, period: PeriodOpt, billing: Addr = DEFAULT_ADDR, csv_file: CsvOpt = None) -> None:
    """Admin: issue the invoice of an ended period now (idempotent)."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    _print_invoice(
        _call(billing, "ClosePeriod", pb.ClosePeriodRequest(tenant=tenant, period=period)), csv_file
    )
