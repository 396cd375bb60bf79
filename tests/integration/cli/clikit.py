"""Test kit of the CLI tests: the queues and nodes the scheduler is started with, running a command the
way a person would (off the event loop), and the server-side checks the tests share."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import Result
from scheduling.helpers import envelope, publish, until
from typer.testing import CliRunner

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.cli.main import app
from suanli.scheduling.entrypoints.app import SchedulingApp

# Queues and priority classes named by examples/jobs/*.yaml, plus queues of our own so that tests which
# count jobs never see each other's.
QUEUES = """
priority_classes: {high: 100, serving: 50, low: 0}
queues:
  - name: acme
    quotas:
      gpu:A100: 256000
      cpu: 1000000
  - {name: acme/vision, quotas: {gpu:A100: 32000, cpu: 128000}}
  - {name: globex, quotas: {gpu:A100: 32000, cpu: 128000}}
  - {name: initech, quotas: {gpu:A100: 32000, cpu: 128000}}
  - {name: acme/lists, quotas: {gpu:A100: 32000, cpu: 128000}}
  - {name: acme/ops, quotas: {gpu:A100: 128000, cpu: 256000}}
  - {name: acme/named, quotas: {gpu:A100: 32000, cpu: 128000}}
"""
QUEUE_NAMES = ("acme", "acme/vision", "globex", "initech", "acme/lists", "acme/ops", "acme/named")

# Nodes of the capacity view: two with 4 A100s in cn-east, one in cn-west for the --region filter.
NODES = {"e1": "cn-east", "e2": "cn-east", "w1": "cn-west"}

# Wide enough that rich never truncates a 36-character job id in a table.
RUNNER = CliRunner(env={"COLUMNS": "240"})

SUBMITTED = re.compile(r"^job (?P<id>\S+) submitted to queue (?P<queue>\S+) \((?P<state>\w+)\)$", re.M)


@dataclass(frozen=True)
class Scheduler:
    app: SchedulingApp
    api: pb_grpc.SchedulerStub
    bootstrap: str
    prefix: str

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.app.port}"

    async def cli(self, *args: str) -> Result:
        """`suanli ARGS --scheduler ADDR`."""
        return await invoke(*args, "--scheduler", self.address)

    async def submit(self, path: Path, *extra: str) -> str:
        """Submit through the CLI; the new job's id, as printed."""
        result = await self.cli("job", "submit", str(path), *extra)
        assert result.exit_code == 0, result.output
        found = SUBMITTED.search(result.stdout)
        assert found, result.stdout
        return found["id"]

    async def job(self, job_id: str) -> pb.Job:
        return await self.api.GetJob(pb.GetJobRequest(job_id=job_id))

    async def state(self, job_id: str, state: int, timeout: float = 20.0) -> pb.Job:
        async def probe() -> pb.Job | None:
            job = await self.job(job_id)
            return job if job.state == state else None

        return await until(probe, timeout, f"job {job_id} in {pb.JobState.Name(state)}")

    async def lifecycle(self, record_name: str, task: pb.TaskStatus, job_id: str, **fields: Any) -> None:
        """Report on tasks.lifecycle as an agent would."""
        base = {"task_id": task.task_id, "job_id": job_id, "node_id": task.node_id, "attempt": task.attempt}
        record = {**envelope(task.task_id), **base, **fields}
        await publish(self.bootstrap, self.prefix, "tasks.lifecycle", task.task_id, record_name, record)


async def invoke(*args: str) -> Result:
    # The CLI's gRPC client blocks: run it off the event loop that serves the scheduler.
    return await asyncio.to_thread(RUNNER.invoke, app, list(args))


def write_spec(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path
