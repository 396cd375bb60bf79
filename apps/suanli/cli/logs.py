"""`suanli job logs JOB`: a task attempt's output, streamed from its node's agent through the scheduler."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, BinaryIO

import typer

from suanli.cli.client import DEFAULT_ADDRESS, SchedulerOption, scheduler, scheduler_client

TaskOption = Annotated[
    str,
    typer.Option(
        "--task", "-t", help="The task: its name (e.g. worker-0) or id. Default: the job's only task."
    ),
]
AttemptOption = Annotated[
    int, typer.Option("--attempt", "-a", min=0, help="The attempt, from 1 (default 0: the latest).")
]
FollowOption = Annotated[
    bool,
    typer.Option(
        "--follow", "-f", help="Wait for the attempt to start, then stream its output until it ends."
    ),
]


async def copy_logs(address: str, job_id: str, task: str, attempt: int, follow: bool, out: BinaryIO) -> None:
    """Write the attempt's output to ``out`` as it arrives."""
    async with scheduler_client(address) as client:
        async for chunk in client.logs(job_id, task, attempt, follow=follow):
            out.write(chunk.data)
            out.flush()


def logs(
    job: Annotated[
        str,
        typer.Argument(
            metavar="JOB", help="Job id, or a job name: the newest job of that name (in --queue when given)."
        ),
    ],
    task: TaskOption = "",
    attempt: AttemptOption = 0,
    follow: FollowOption = False,
    queue: Annotated[str, typer.Option("--queue", "-q", help="Look a job name up in this queue only.")] = "",
    address: SchedulerOption = DEFAULT_ADDRESS,
) -> None:
    """Print a task attempt's output (stdout and stderr), like `kubectl logs`.

    The scheduler checks the job is yours and streams the output from the agent of the node the attempt
    ran on; you never talk to a node. Simulated nodes run no processes and answer FAILED_PRECONDITION.
    """
    from suanli.cli.job import resolve  # the job module registers this command: imported on use

    with scheduler(address) as stub:
        job_id = resolve(stub, job, queue).id
        try:
            asyncio.run(copy_logs(address, job_id, task, attempt, follow, sys.stdout.buffer))
        except KeyboardInterrupt:  # -f ends with ^C, as `tail -f` and `kubectl logs -f` do
            raise typer.Exit(130) from None
