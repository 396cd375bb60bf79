"""`suanli acct`: accounting per job, like Slurm's sacct: elapsed time, GPU-hours, CPU-hours and cost.

What the job ran comes from the scheduler's record of it (DescribeJob: each attempt's start and end,
with the GPUs and cores it held and the price per hour it was placed at); what was billed comes from
billing's charges of the job (ListCharges with its id: CU-hours and the amount). When billing cannot be
asked (not reachable, or the token's role may not read charges), its columns stay empty and stderr says
why: the scheduler's figures stand on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.auth.principal import tenant_of_queue
from suanli.cli import config, paging
from suanli.cli.client import DEFAULT_ADDRESS, UNARY_TIMEOUT_S, SchedulerOption, rpc_failure, scheduler
from suanli.cli.job import list_jobs, state_option
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows, note
from suanli.cli.render import duration, state_name, timestamp, to_data
from suanli.cli.selectors import in_subtree

BILLING_ENV = "SUANLI_BILLING_ADDR"
BILLING_BUILTIN = "localhost:50055"
CHARGES_PAGE = 1000

COLUMNS = (
    "id",
    "name",
    "queue",
    "state",
    "submitted",
    "attempts",
    "elapsed",
    "gpu_hours",
    "cu_hours",
    "cost",
    "billed",
    "wait",
    "cpu_hours",
    "currency",
)
WIDE = frozenset({"wait", "cpu_hours", "currency"})
NUMERIC = frozenset({"attempts", "elapsed", "gpu_hours", "cu_hours", "cost", "billed", "wait", "cpu_hours"})


@dataclass(frozen=True, slots=True)
class Billed:
    """A job's charges, summed (decimal strings as billing sends them)."""

    cu_hours: Decimal
    amount: Decimal
    currency: str
    charges: int


def parse_since(text: str, now: datetime) -> datetime:
    """--since: an instant (2026-01-31, 2026-01-31T10:00Z) or a span back from now (90m, 12h, 7d)."""
    value = text.strip()
    try:
        from suanli.jobspec.units import parse_duration_s

        return now - timedelta(seconds=parse_duration_s(value))
    except ValueError:
        pass
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: a date or time (2026-01-31, 2026-01-31T10:00Z) or a span back from now (12h, 7d)",
            param_hint="--since",
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


class Charges:
    """Billing's charges per job; after the first failure it is not asked again (one note says why)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.problem = ""
        self._channel: Any = None
        self._stub: Any = None

    def __enter__(self) -> Charges:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._channel is not None:
            self._channel.close()

    def of(self, job: pb.Job) -> Billed | None:
        import grpc

        from suanli.api.billing.v1 import billing_pb2 as bpb
        from suanli.api.billing.v1 import billing_pb2_grpc

        if self.problem:
            return None
        try:
            if self._stub is None:
                self.address = config.server("billing", self.address, BILLING_BUILTIN)
                self._channel = config.channel(self.address)
                self._stub = billing_pb2_grpc.BillingStub(self._channel)
            tenant = tenant_of_queue(job.spec.queue)
            request = bpb.ListChargesRequest(tenant=tenant, job_id=job.id, page_size=CHARGES_PAGE)
            cu = amount = Decimal(0)
            currency, count = "", 0
            while True:
                page = self._stub.ListCharges(request, timeout=UNARY_TIMEOUT_S)
                for charge in page.charges:
                    cu += Decimal(charge.cu_hours or "0")
                    amount += Decimal(charge.amount or "0")
                    currency = currency or charge.currency
                    count += 1
                if not page.next_page_token:
                    return Billed(cu, amount, currency, count)
                request.page_token = page.next_page_token
        except grpc.RpcError as exc:
            self.problem = rpc_failure(exc, self.address, service="billing").message
        except config.ConfigError as exc:
            self.problem = str(exc)
        return None


def _row(job: pb.Job, described: pb.JobDescription, billed: Billed | None) -> tuple[str, ...]:
    acct = described.accounting
    return (
        job.id,
        job.spec.name,
        job.spec.queue,
        state_name(job.state),
        timestamp(job.submitted_at),
        str(acct.attempts),
        duration(acct.elapsed_s),
        f"{acct.gpu_hours:.3f}",
        f"{billed.cu_hours:.3f}" if billed else "-",
        f"{acct.cost:.4f}" if acct.HasField("cost") else "-",
        f"{billed.amount:.2f}" if billed else "-",
        duration(acct.wait_s),
        f"{acct.cpu_hours:.3f}",
        billed.currency if billed and billed.currency else "-",
    )


def _item(job: pb.Job, described: pb.JobDescription, billed: Billed | None) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.spec.name,
        "queue": job.spec.queue,
        "tenant": tenant_of_queue(job.spec.queue),
        "state": pb.JobState.Name(job.state),
        "submitted_at": to_data(job).get("submitted_at"),
        "accounting": to_data(described.accounting),
        "billed": None
        if billed is None
        else {
            "cu_hours": str(billed.cu_hours),
            "amount": str(billed.amount),
            "currency": billed.currency,
            "charges": billed.charges,
        },
    }


def acct(
    queue: Annotated[
        str, typer.Option("--queue", "-q", help="Only this queue and the queues below it.")
    ] = "",
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Only this tenant's jobs.")] = "",
    state: Annotated[
        str | None,
        typer.Option("--state", "-s", help="Only jobs in this state: pending, running, succeeded, ..."),
    ] = None,
    since: Annotated[
        str,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only jobs submitted since: a date or time (2026-01-31, 2026-01-31T10:00Z) or a span "
            "back from now (12h, 7d).",
            show_default=False,
        ),
    ] = "",
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="At most this many jobs (0: all).")
    ] = 100,
    continue_token: paging.ContinueOption = "",
    charges: Annotated[
        bool,
        typer.Option("--charges/--no-charges", help="Ask billing for each job's CU-hours and billed amount."),
    ] = True,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
    billing: Annotated[
        str,
        typer.Option(
            "--billing",
            envvar=BILLING_ENV,
            show_default=False,
            help=f"Billing gRPC address HOST:PORT (default: the config context's, else {BILLING_BUILTIN}).",
        ),
    ] = "",
) -> None:
    """Accounting per job, newest first: elapsed, GPU-hours, CU-hours and cost (like sacct).

    Elapsed, GPU- and CPU-hours and the expected cost come from the scheduler's record of each attempt;
    CU-hours and the billed amount from billing's charges of the job. -o csv|json exports them. When more
    jobs are left, stderr says how to go on: --continue TOKEN lists the next ones.
    """
    wanted = state_option(state)
    start = parse_since(since, datetime.now(UTC)) if since else None
    below = in_subtree(queue) if queue else None

    def keep(job: pb.Job) -> bool:
        return (below is None or below(job.spec.queue)) and (
            not tenant or tenant_of_queue(job.spec.queue) == tenant
        )

    def before_start(job: pb.Job) -> bool:
        # Newest first: the first job submitted before --since ends the listing.
        return start is not None and job.submitted_at.ToDatetime(tzinfo=UTC) < start

    out: list[tuple[pb.Job, pb.JobDescription, Billed | None]] = []
    with scheduler(address) as stub, Charges(billing) as bills:
        jobs, token = list_jobs(
            stub,
            "",
            wanted,
            limit,
            token=continue_token,
            keep=keep if (below or tenant) else None,
            until=before_start if start else None,
        )
        for job in jobs:
            described = stub.DescribeJob(pb.DescribeJobRequest(job_id=job.id), timeout=UNARY_TIMEOUT_S)
            out.append((job, described, bills.of(job) if charges else None))
    gpu_hours = sum(d.accounting.gpu_hours for _, d, _ in out)
    billed = [b for _, _, b in out if b is not None]
    title = f"{len(out)} jobs: {gpu_hours:.3f} GPU-hours"
    if billed:
        currency = next((b.currency for b in billed if b.currency), "")
        cu = sum((b.cu_hours for b in billed), Decimal(0))
        amount = sum((b.amount for b in billed), Decimal(0))
        title += f", {cu:.3f} CU-hours, billed {amount:.2f} {currency}".rstrip()
    rows = Rows(
        COLUMNS,
        [_row(*entry) for entry in out],
        title,
        right=NUMERIC,
        wide=WIDE,
        kind="job",
        names=[j.id for j, _, _ in out],
        items=[_item(*entry) for entry in out],
        key="jobs",
    )
    emit_rows(output, {"jobs": list(rows.items)}, rows, no_headers=no_headers, sort_by=sort_by)
    paging.more(len(out), token)
    if charges and bills.problem:
        note(f"billing: {bills.problem}; CU-hours and billed amounts are left out")
