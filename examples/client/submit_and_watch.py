"""Submit a job with the Python client (`suanli.client`) and follow it until it ends.

    python examples/client/submit_and_watch.py examples/jobs/cpu-batch.yaml

The scheduler, token and CA come from the CLI's config file (`suanli up` writes one), like `suanli job
submit --wait`; ``--request-id`` makes the submit idempotent across re-runs (the same id answers the same
job). Exits 0 when the job succeeded, 1 otherwise. docs/client.md explains the client.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.client import SchedulerClient
from suanli.jobspec import load_jobspec


async def submit_and_watch(
    spec_path: str, *, request_id: str | None = None, client: SchedulerClient | None = None
) -> pb.JobState:
    """Submit the spec at ``spec_path``, print each state change, and return the final state."""
    spec = load_jobspec(spec_path)
    async with client or SchedulerClient.from_config() as scheduler:
        job = await scheduler.submit(spec, request_id=request_id)
        print(f"job {job.id} submitted to {job.spec.queue}")
        state = job.state
        async for event in scheduler.watch(job.id):
            state = event.state
            print(f"{event.at.ToDatetime():%H:%M:%S} {pb.JobState.Name(state)} {event.event} {event.message}")
        return state


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec", help="a job spec file (docs/jobspec.md)")
    parser.add_argument("--request-id", help="idempotency key (default: a new one)")
    args = parser.parse_args()
    final = asyncio.run(submit_and_watch(args.spec, request_id=args.request_id))
    return 0 if final == pb.JOB_STATE_SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main())
