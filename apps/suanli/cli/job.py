"""`suanli job ...`: submit a YAML job spec, inspect, list, cancel, watch and explain jobs."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc
from suanli.cli import paging
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
)
from suanli.cli.output import OutputOption, emit, stdout
from suanli.cli.render import (
    FINAL_STATES,
    OutputFormat,
    event_line,
    explanation,
    job_detail,
    jobs_table,
    parse_state,
    state_name,
    to_data,
)
from suanli.jobspec import load_jobspec, to_proto

app = typer.Typer(help="Submit and follow jobs.", no_args_is_help=True)

# The server caps pages anyway; this keeps one answer small enough to render while the next is fetched.
PAGE_SIZE = 100

JobId = Annotated[str, typer.Argument(metavar="ID", help="Job id.")]


def exit_code_of(state: int) -> int:
    return 0 if state == pb.JOB_STATE_SUCCEEDED else EXIT_JOB_FAILED


def _follow(stub: scheduler_pb2_grpc.SchedulerStub, job_id: str) -> int:
    """Print the job's events until it is final; its exit code says how it ended."""
    for event in stub.WatchJob(pb.WatchJobRequest(job_id=job_id)):
        stdout.print(event_line(event))
        if event.state in FINAL_STATES:
            return exit_code_of(event.state)
    # The server ends the stream only at a final state; anything else is a dropped stream.
    raise fail(Failure(f"the watch of job {job_id} ended before the job finished", EXIT_REFUSED))


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Job spec YAML (see docs/jobspec.md).")],
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Submit to this queue instead.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the job until it ends; exit 1 if it fails.")
    ] = False,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Validate FILE and submit it; prints the new job's id."""
    with reported(address):
        spec = load_jobspec(file, queue=queue)
    request = pb.SubmitJobRequest(spec=to_proto(spec), request_id=str(uuid.uuid4()))
    with scheduler(address) as stub:
        job = stub.SubmitJob(request, timeout=UNARY_TIMEOUT_S).job
        queue_name = job.spec.queue or spec.queue
        stdout.print(f"job {job.id} submitted to queue {queue_name} ({state_name(job.state)})")
        if wait:
            code = _follow(stub, job.id)
    if wait and code:
        raise typer.Exit(code)


@app.command()
def get(
    job_id: JobId, output: OutputOption = OutputFormat.TABLE, address: SchedulerOption = DEFAULT_ADDRESS
) -> None:
    """Show one job: spec, state, pending reason and where each task runs."""
    with scheduler(address) as stub:
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S)
    emit(output, to_data(job), job_detail(job))


def list_jobs(
    stub: scheduler_pb2_grpc.SchedulerStub, queue: str, state: int, limit: int
) -> tuple[list[pb.Job], bool]:
    def fetch(size: int, token: str) -> tuple[Sequence[pb.Job], str]:
        request = pb.ListJobsRequest(queue=queue, state=state, page_size=size, page_token=token)  # type: ignore[arg-type]
        page = stub.ListJobs(request, timeout=UNARY_TIMEOUT_S)
        return page.jobs, page.next_page_token

    return paging.collect(fetch, page_size=PAGE_SIZE, limit=limit)


def _state_option(value: str | None) -> int:
    """--state as the wire enum; parsed here rather than by typer so the error lists the choices."""
    try:
        return parse_state(value) if value else pb.JOB_STATE_UNSPECIFIED
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--state") from None


@app.command("list")
def list_command(
    queue: Annotated[str, typer.Option("--queue", "-q", help="Only this queue.")] = "",
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
    output: OutputOption = OutputFormat.TABLE,
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """List jobs, following the scheduler's pages until --limit."""
    wanted = _state_option(state)
    with scheduler(address) as stub:
        jobs, more = list_jobs(stub, queue, wanted, limit)
    emit(output, {"jobs": [to_data(j) for j in jobs]}, jobs_table(jobs))
    if more and output is OutputFormat.TABLE:
        stdout.print(f"(first {limit} shown; --limit 0 lists all)", style="dim")


@app.command()
def cancel(
    job_id: JobId,
    reason: Annotated[str, typer.Option("--reason", help="Recorded with the cancellation.")] = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Cancel a job; its running tasks are stopped."""
    with scheduler(address) as stub:
        job = stub.CancelJob(pb.CancelJobRequest(job_id=job_id, reason=reason), timeout=UNARY_TIMEOUT_S)
    stdout.print(f"job {job.id} {state_name(job.state).lower()}")


@app.command()
def watch(job_id: JobId, address: SchedulerOption = DEFAULT_ADDRESS) -> None:
    """Stream the job's state changes until it ends: exit 0 on Succeeded, 1 on Failed or Cancelled."""
    with scheduler(address) as stub:
        code = _follow(stub, job_id)
    raise typer.Exit(code)


@app.command()
def explain(
    job_id: JobId, output: OutputOption = OutputFormat.TABLE, address: SchedulerOption = DEFAULT_ADDRESS
) -> None:
    """Why a job is pending (reason code, message, details), or the node scores behind its placement."""
    with scheduler(address) as stub:
        explained = stub.ExplainJob(pb.ExplainJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S)
    emit(output, to_data(explained), explanation(explained))
