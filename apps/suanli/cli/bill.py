"""`suanli bill usage|charges|invoice|close`: the Billing gRPC API from the shell.

Every command has a default period (the service resolves it, since only it knows how long periods are)
and the CLI's one output style (`-o table|wide|name|json|yaml|csv|jsonpath=`, `--no-headers`,
`--sort-by`) through the shared `suanli.cli.output.emit_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suanli.cli import config, paging
from suanli.cli.client import EXIT_USAGE, Failure, fail, rpc_failure
from suanli.cli.output import TABLE, NoHeadersOption, Output, OutputOption, Rows, SortByOption, emit_rows
from suanli.cli.render import to_data

if TYPE_CHECKING:
    from suanli.api.billing.v1 import billing_pb2_grpc

ADDR_ENV = "SUANLI_BILLING_ADDR"
BUILTIN_ADDR = "localhost:50055"
DEFAULT_ADDR = ""  # not given: the config context's billing address, else BUILTIN_ADDR
TIMEOUT_S = 30.0
ALL_PERIODS = "all"
PAGE_SIZE = 500
TOKEN_TENANT = "the token's tenant"

app = typer.Typer(
    help="Usage, charges and invoices from the billing service. A period is a label (2025-03, "
    "2025-03-03, 2025-03-03T14:05Z: the period containing it), current or previous; how long periods "
    "are is the service's SUANLI_BILLING_PERIOD.",
    no_args_is_help=True,
)

Addr = Annotated[
    str,
    typer.Option(
        "--billing",
        envvar=ADDR_ENV,
        show_default=False,
        help=f"Billing gRPC address HOST:PORT (default: the config context's, else {BUILTIN_ADDR}).",
    ),
]
Tenant = Annotated[
    str, typer.Option("--tenant", "-t", show_default=False, help=f"Tenant (default: {TOKEN_TENANT}).")
]


def _period_option(default_means: str) -> Any:
    return typer.Option(
        "--period", "-p", show_default=False, help=f"Label, current or previous (default: {default_means})."
    )


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


_MONEY = frozenset({"cu_hours", "amount", "charges", "unit_price", "quantity"})


@app.command()
def usage(
    tenant: Tenant = "",
    period: Annotated[str, _period_option("current")] = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    billing: Addr = DEFAULT_ADDR,
) -> None:
    """Usage of a tenant in a period (by when it happened), by device class and region."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    answer = _call(billing, "GetUsage", pb.GetUsageRequest(tenant=tenant, period=period))
    rows = Rows(
        ("device_class", "region", "cu_hours", "amount", "charges"),
        [(r.device_class, r.region, r.cu_hours, r.amount, str(r.charges)) for r in answer.rows],
        f"{answer.tenant} usage {answer.period.label}: {answer.total} {answer.currency}",
        _MONEY,
    )
    emit_rows(output, to_data(answer), rows, no_headers=no_headers, sort_by=sort_by)


_CHARGE_COLUMNS = (
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


@app.command()
def charges(
    tenant: Tenant = "",
    period: Annotated[
        str,
        typer.Option(
            "--period",
            "-p",
            help=f"Billing period (the invoice that carries the charge): label, current, previous or "
            f"{ALL_PERIODS}.",
        ),
    ] = "current",
    job: Annotated[str, typer.Option("--job", help="Only this job's charges.")] = "",
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many (0: all).")] = 0,
    continue_token: paging.ContinueOption = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    billing: Addr = DEFAULT_ADDR,
) -> None:
    """Charges of a tenant, newest first (all pages unless --limit).

    When more are left, stderr says how to go on: --continue TOKEN lists the next ones.
    """
    from suanli.api.billing.v1 import billing_pb2 as pb

    wanted = "" if period.strip().lower() == ALL_PERIODS else period

    def fetch(size: int, page_token: str) -> tuple[Sequence[Any], str]:
        request = pb.ListChargesRequest(
            tenant=tenant,
            period=wanted,
            job_id=job,
            page_size=size,
            page_token=page_token,
            newest_first=True,
        )
        answer = _call(billing, "ListCharges", request)
        return answer.charges, answer.next_page_token

    found, token = paging.collect_from(fetch, page_size=PAGE_SIZE, limit=limit, token=continue_token)
    rows = Rows(
        _CHARGE_COLUMNS,
        [
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
            for c in found
        ],
        f"{tenant or TOKEN_TENANT} charges, billing period {period}: {len(found)}",
        _MONEY,
        kind="charge",
        items=[to_data(c) for c in found],
        key="charges",
    )
    emit_rows(output, {"charges": list(rows.items)}, rows, no_headers=no_headers, sort_by=sort_by)
    paging.more(len(found), token)


def _emit_invoice(answer: Any, output: Output, no_headers: bool, sort_by: str) -> None:
    rows = Rows(
        ("device_class", "description", "quantity", "unit", "amount", "adjustment_of"),
        [
            (ln.device_class, ln.description, ln.quantity, ln.unit, ln.amount, ln.adjustment_of)
            for ln in answer.lines
        ],
        f"invoice {answer.invoice_id} {answer.tenant} {answer.period.label}: "
        f"{answer.total} {answer.currency}",
        _MONEY,
    )
    emit_rows(output, to_data(answer), rows, no_headers=no_headers, sort_by=sort_by)


@app.command()
def invoice(
    tenant: Tenant = "",
    period: Annotated[str, _period_option("the latest period invoiced")] = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    billing: Addr = DEFAULT_ADDR,
) -> None:
    """The issued invoice of a tenant (the current period has none until it ends and is closed)."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    _emit_invoice(
        _call(billing, "GetInvoice", pb.GetInvoiceRequest(tenant=tenant, period=period)),
        output,
        no_headers,
        sort_by,
    )


@app.command()
def close(
    tenant: Tenant = "",
    period: Annotated[str, _period_option("previous, the period that ended last")] = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    billing: Addr = DEFAULT_ADDR,
) -> None:
    """Admin: issue the invoice of an ended period now, without waiting for the grace (idempotent)."""
    from suanli.api.billing.v1 import billing_pb2 as pb

    _emit_invoice(
        _call(billing, "ClosePeriod", pb.ClosePeriodRequest(tenant=tenant, period=period)),
        output,
        no_headers,
        sort_by,
    )
