"""`suanli job ...`: submit a YAML job spec, inspect, list, cancel, watch, explain and trace jobs."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import grpc
import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc
from suanli.cli import paging, watching
from suanli.cli.client import (
    DEFAULT_ADDRESS,
    EXIT_JOB_FAILED,
    EXIT_REFUSED,
    UNARY_TIMEOUT_S,
    Failure,
    SchedulerOption,
    fail,
    reported,
    scheduler,
    scheduler_client,
)
from suanli.cli.logs import logs
from suanli.cli.output import (
    TABLE,
    NoHeadersOption,
    OutputOption,
    Rows,
    SortByOption,
    emit,
    emit_rows,
    stdout,
)
from suanli.cli.render import (
    FINAL_STATES,
    description,
    event_line,
    explanation,
    job_detail,
    jobs_rows,
    parse_state,
    state_name,
    to_data,
)
from suanli.cli.selectors import Selector, SelectorOption, in_subtree
from suanli.cli.trace import TracesOption, show_trace
from suanli.cli.watching import IntervalOption, WatchOption

if TYPE_CHECKING:
    from suanli.client import SchedulerClient
    from suanli.jobspec import JobSpec

app = typer.Typer(help="Submit and follow jobs.", no_args_is_help=True)

# The server caps pages anyway; this keeps one answer small enough to render while the next is fetched.
PAGE_SIZE = 100

JobRef = Annotated[
    str,
    typer.Argument(
        metavar="JOB", help="Job id, or a job name: the newest job of that name (in --queue when given)."
    ),
]
QueueFilter = Annotated[str, typer.Option("--queue", "-q", help="Look a job name up in this queue only.")]


def exit_code_of(state: int) -> int:
    return 0 if state == pb.JOB_STATE_SUCCEEDED else EXIT_JOB_FAILED


async def _follow(client: SchedulerClient, job_id: str) -> int:
    """Print the job's events until it is final; its exit code says how it ended."""
    async for event in client.watch(job_id):  # reopened by the client when the stream drops
        stdout.print(event_line(event))
        if event.state in FINAL_STATES:
            return exit_code_of(event.state)
    raise fail(Failure(f"the watch of job {job_id} ended before the job finished", EXIT_REFUSED))


async def _submit(address: str, spec: JobSpec, wait: bool) -> int:
    async with scheduler_client(address) as client:
        job = await client.submit(spec)  # one request_id for all its tries
        queue_name = job.spec.queue or spec.queue
        stdout.print(f"job {job.id} submitted to queue {queue_name} ({state_name(job.state)})")
        return await _follow(client, job.id) if wait else 0


async def _watch(address: str, job_id: str) -> int:
    async with scheduler_client(address) as client:
        return await _follow(client, job_id)


async def _cancel(address: str, job_id: str, reason: str) -> pb.Job:
    async with scheduler_client(address) as client:
        return await client.cancel(job_id, reason)


@app.command()
def submit(
    file: Annotated[
        str | None,
        typer.Argument(
            metavar="[FILE]", help="Job spec YAML (see docs/jobspec.md); - reads stdin.", show_default=False
        ),
    ] = None,
    file_option: Annotated[
        str | None,
        typer.Option(
            "--file",
            "-f",
            metavar="FILE",
            help="The same as FILE; `suanli job get JOB -o yaml | suanli job submit -f -` submits a copy.",
            show_default=False,
        ),
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Submit to this queue instead.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the job until it ends; exit 1 if it fails.")
    ] = False,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Validate a job spec (FILE, -f FILE or - for stdin) and submit it; prints the new job's id.

    A job as `suanli job get -o yaml|json` prints it is accepted too: its spec is submitted again.
    """
    if (file is None) == (file_option is None):
        raise typer.BadParameter("give one of FILE or -f FILE (- for stdin)", param_hint="FILE")
    with reported(address):
        spec = _read_spec(file if file is not None else str(file_option), queue)
        code = asyncio.run(_submit(address, spec, wait))
    if code:
        raise typer.Exit(code)


def _read_spec(source: str, queue: str | None) -> JobSpec:
    """A spec file, or stdin for `-`; a job document (`job get -o yaml`) gives its spec."""
    from suanli.jobspec import JobSpecError

    if source == "-":
        return spec_of_document(sys.stdin.read(), "<stdin>", queue)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise JobSpecError([f"cannot read: {exc.strerror or exc}"], source) from None
    return spec_of_document(text, source, queue)


def spec_of_document(text: str, source: str, queue: str | None = None) -> JobSpec:
    """The spec in YAML text: a spec file, or a job as `-o yaml|json` prints it (id, spec, state...)."""
    import yaml

    from suanli.jobspec import JobSpecError, document_from_proto, parse_jobspec, validate_document

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return parse_jobspec(text, source=source, queue=queue)  # it reports where the YAML breaks
    if isinstance(document, dict) and "id" in document and isinstance(document.get("spec"), dict):
        from google.protobuf.json_format import ParseDict, ParseError

        try:
            wire = ParseDict(document["spec"], pb.JobSpec(), ignore_unknown_fields=True)
        except ParseError as exc:
            raise JobSpecError([f"spec: {exc}"], source) from None
        document = document_from_proto(wire)
    return validate_document(document, source=source, queue=queue)


def resolve(stub: scheduler_pb2_grpc.SchedulerStub, ref: str, queue: str = "") -> pb.Job:
    """The job `ref` names: its id, else the newest job of that name (names are unique per queue only)."""
    try:
        job: pb.Job = stub.GetJob(pb.GetJobRequest(job_id=ref), timeout=UNARY_TIMEOUT_S)
        if not queue or job.spec.queue == queue:
            return job
    except grpc.RpcError as exc:
        if exc.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            raise
    token = ""
    while True:  # newest first, so the first match is the newest job of that name
        request = pb.ListJobsRequest(queue=queue, page_size=PAGE_SIZE, page_token=token, newest_first=True)
        page = stub.ListJobs(request, timeout=UNARY_TIMEOUT_S)
        for job in page.jobs:
            if job.spec.name == ref:
                return job
        token = page.next_page_token
        if not token or not page.jobs:
            where = f" in queue {queue}" if queue else ""
            raise fail(Failure(f"NOT_FOUND: no job with id or name {ref!r}{where}", EXIT_REFUSED))


@app.command()
def get(
    job: JobRef,
    queue: QueueFilter = "",
    output: OutputOption = TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Show one job: spec, state, pending reason and where each task runs."""
    with scheduler(address) as stub:
        found = resolve(stub, job, queue)
    emit(output, to_data(found), job_detail(found), name=f"job/{found.id}")


@app.command()
def describe(
    job: JobRef,
    queue: QueueFilter = "",
    output: OutputOption = TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Show one job with its history, like `kubectl describe`: what it used, each attempt of each task
    (node, GPUs, when it ran, how it ended) and its events (placed where, preempted by which job,
    cancelled by whom and why, failed with which exit code, requeued), read from the job's record."""
    with scheduler(address) as stub:
        job_id = resolve(stub, job, queue).id
        described = stub.DescribeJob(pb.DescribeJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S)
    emit(output, to_data(described), description(described), name=f"job/{job_id}")


def list_jobs(
    stub: scheduler_pb2_grpc.SchedulerStub,
    queue: str,
    state: int,
    limit: int,
    *,
    token: str = "",
    newest_first: bool = True,
    keep: Callable[[pb.Job], bool] | None = None,
    until: Callable[[pb.Job], bool] | None = None,
) -> tuple[list[pb.Job], str]:
    """Up to `limit` jobs (0: all) from `token` on that `keep` keeps, up to the first `until` is true of,
    and the token to continue after them ("": no more)."""

    def fetch(size: int, page_token: str) -> tuple[Sequence[pb.Job], str]:
        request = pb.ListJobsRequest(
            queue=queue,
            state=state,  # type: ignore[arg-type]
            page_size=size,
            page_token=page_token,
            newest_first=newest_first,
        )
        page = stub.ListJobs(request, timeout=UNARY_TIMEOUT_S)
        return page.jobs, page.next_page_token

    return paging.collect_from(fetch, page_size=PAGE_SIZE, limit=limit, token=token, keep=keep, until=until)


def jobs_answer(jobs: Sequence[pb.Job]) -> tuple[dict[str, Any], Rows]:
    """A job listing as `-o json|yaml` give it whole, and as its rows."""
    return {"jobs": [to_data(j) for j in jobs]}, jobs_rows(jobs)


def state_option(value: str | None) -> int:
    """--state as the wire enum; parsed here rather than by typer so the error lists the choices."""
    try:
        return parse_state(value) if value else pb.JOB_STATE_UNSPECIFIED
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--state") from None


@app.command("list")
def list_command(
    queue: Annotated[str, typer.Option("--queue", "-q", help="Only this queue.")] = "",
    subtree: Annotated[
        bool, typer.Option("--subtree", help="With --queue: that queue and every queue below it.")
    ] = False,
    selector: SelectorOption = None,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            "-s",
            help="Only jobs in this state: pending, running, succeeded, failed, cancelled.",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="At most this many jobs (0: all).")
    ] = 100,
    continue_token: paging.ContinueOption = "",
    oldest_first: Annotated[
        bool, typer.Option("--oldest-first", help="In submission order instead of newest first.")
    ] = False,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    watch_rows: WatchOption = False,
    interval: IntervalOption = 2.0,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List jobs, newest first, following the scheduler's pages until --limit.

    When more are left, stderr says how to go on: --continue TOKEN lists the next ones. With --watch,
    each job that appears or changes is printed as it does, until Ctrl-C.
    """
    wanted = state_option(state)
    labels = Selector.parse(selector)
    if subtree and not queue:
        raise typer.BadParameter("--subtree needs --queue", param_hint="--subtree")
    below = in_subtree(queue) if subtree else None

    def keep(job: pb.Job) -> bool:
        return (below is None or below(job.spec.queue)) and labels.matches(job.spec.labels)

    with scheduler(address) as stub:

        def listing() -> tuple[list[pb.Job], str]:
            return list_jobs(
                stub,
                "" if subtree else queue,  # the server filters one queue; a subtree is filtered here
                wanted,
                limit,
                token=continue_token,
                newest_first=not oldest_first,
                keep=keep if below is not None or labels else None,
            )

        if watch_rows:
            watching.watch(
                lambda: jobs_answer(listing()[0]),
                output,
                interval_s=interval,
                no_headers=no_headers,
                sort_by=sort_by,
            )
            return
        jobs, token = listing()
    data, rows = jobs_answer(jobs)
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)
    paging.more(len(jobs), token)


@app.command()
def cancel(
    job: JobRef,
    reason: Annotated[str, typer.Option("--reason", help="Recorded with the cancellation.")] = "",
    queue: QueueFilter = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Cancel a job; its running tasks are stopped."""
    with scheduler(address) as stub:
        job_id = resolve(stub, job, queue).id
        cancelled = asyncio.run(_cancel(address, job_id, reason))
    stdout.print(f"job {cancelled.id} {state_name(cancelled.state).lower()}")


@app.command()
def watch(job: JobRef, queue: QueueFilter = "", address: SchedulerOption = DEFAULT_ADDRESS) -> None:
    """Stream the job's state changes until it ends: exit 0 on Succeeded, 1 on Failed or Cancelled."""
    with scheduler(address) as stub:
        code = asyncio.run(_watch(address, resolve(stub, job, queue).id))
    raise typer.Exit(code)


@app.command()
def explain(
    job: JobRef,
    queue: QueueFilter = "",
    output: OutputOption = TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Why a job is pending (reason code, message, details), or the node scores behind its placement."""
    with scheduler(address) as stub:
        job_id = resolve(stub, job, queue).id
        explained = stub.ExplainJob(pb.ExplainJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S)
    emit(output, to_data(explained), explanation(explained), name=f"job/{job_id}")


@app.command()
def trace(
    job: JobRef,
    queue: QueueFilter = "",
    traces: TracesOption = "",
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Show the job's timeline across services from its traces: each span (service, name, start offset
    from the submission, duration) and where the time went (queue, placement, delivery, start, run,
    metering, charge). Spans are read from a Jaeger query API (--traces)."""
    with scheduler(address) as stub:
        job_id = resolve(stub, job, queue).id
    show_trace(job_id, traces, output, no_headers=no_headers, sort_by=sort_by)


# `suanli job logs`: its own module (the stream from the node's agent), listed with the job commands.
app.command("logs")(logs)
