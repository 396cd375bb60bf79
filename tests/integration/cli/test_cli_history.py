"""`suanli job describe` and `suanli acct` against the real scheduling service: a job's history as a
person and a script read it, and accounting exported as CSV and JSON."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from pagekit import GARBAGE, assert_pages, follow
from scheduling.helpers import envelope, publish

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.main import app
from suanli.contracts import default_registry, sample_records
from suanli.contracts import labels as node_labels

from .clikit import RUNNER, Scheduler, until, write_spec

pytestmark = pytest.mark.timeout(120)

ONE_GPU = """
name: {name}
queue: acme/ops
max_retries: 0
tasks:
  - name: w
    resources: {{cpu: "2", memory: 1Gi, gpu: 1}}
    command: python train.py
    duration: 1h
"""


def closed_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def _placed(scheduler: Scheduler, job_id: str) -> pb.TaskStatus:
    async def probe() -> pb.TaskStatus | None:
        tasks = (await scheduler.job(job_id)).tasks
        return tasks[0] if tasks and tasks[0].state == "PLACED" else None

    return await until(probe, what=f"a placed task of {job_id}")


async def test_describe_and_acct_of_a_run_job_then_a_cancelled_one(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    done = await scheduler.submit(write_spec(tmp_path, "done", ONE_GPU.format(name="history-done")))
    ran_task = task = await _placed(scheduler, done)
    await scheduler.lifecycle("TaskStarted", task, done, device_indices=[0], pid=7)
    await scheduler.state(done, pb.JOB_STATE_RUNNING)
    await scheduler.lifecycle("TaskFailed", task, done, reason="out of memory", kind="ERROR", exit_code=137)
    await scheduler.state(done, pb.JOB_STATE_FAILED)

    cancelled = await scheduler.submit(write_spec(tmp_path, "c", ONE_GPU.format(name="history-cancel")))
    task = await _placed(scheduler, cancelled)
    result = await scheduler.cli("job", "cancel", "history-cancel", "--reason", "wrong data set")
    assert result.exit_code == 0, result.output

    # For people: the Events table says what happened, who cancelled and why, the exit code.
    shown = await scheduler.cli("job", "describe", "history-done")
    assert shown.exit_code == 0, shown.output
    assert "failed: ERROR: out of memory (exit code 137)" in shown.stdout
    assert f"placed on node {ran_task.node_id} in region cn-" in shown.stdout
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert any(
        line[:3] == [ran_task.task_id, "1", ran_task.node_id] and line[-2:] == ["FAILED", "137"]
        for line in lines
    ), shown.stdout
    shown = await scheduler.cli("job", "describe", cancelled)
    assert shown.exit_code == 0, shown.output
    assert "cancelled by ipv" in shown.stdout and ": wrong data set" in shown.stdout

    # For scripts: the whole answer, in JSON and in YAML alike.
    data = json.loads((await scheduler.cli("job", "describe", cancelled, "-o", "json")).stdout)
    assert [e["type"] for e in data["events"]] == [
        "JobSubmitted",
        "TaskPlaced",
        "TaskStopRequested",
        "JobCancelled",
    ]
    assert data["events"][-1]["reason"] == "wrong data set"
    as_yaml = yaml.safe_load((await scheduler.cli("job", "describe", cancelled, "-o", "yaml")).stdout)
    assert as_yaml["events"] == data["events"] and as_yaml["job"]["id"] == cancelled

    # acct: both jobs, newest first, filtered by queue subtree and state; exported as CSV and JSON.
    got = await scheduler.cli("acct", "--queue", "acme/ops", "--no-charges", "-o", "csv", "--since", "1h")
    assert got.exit_code == 0, got.output
    table = list(csv.DictReader(io.StringIO(got.stdout)))
    ours = [row for row in table if row["id"] in (done, cancelled)]
    assert [row["id"] for row in ours] == [cancelled, done]
    ran = ours[1]
    assert ran["state"] == "Failed" and ran["attempts"] == "1" and float(ran["gpu_hours"]) >= 0
    assert ran["cu_hours"] == "-" and ran["billed"] == "-"  # --no-charges: billing not asked
    assert ours[0]["elapsed"] == "00:00:00" and ours[0]["gpu_hours"] == "0.000"  # never started

    failed = json.loads(
        (await scheduler.cli("acct", "--state", "failed", "--no-charges", "-o", "json")).stdout
    )
    assert done in [j["id"] for j in failed["jobs"]] and cancelled not in [j["id"] for j in failed["jobs"]]
    [entry] = [j for j in failed["jobs"] if j["id"] == done]
    assert entry["tenant"] == "acme" and entry["billed"] is None and entry["accounting"]["attempts"] == 1

    # Billing away: the scheduler's figures still come, stderr says why the billed ones do not.
    away = await scheduler.cli("acct", "--tenant", "acme", "--limit", "1", "--billing", closed_address())
    assert away.exit_code == 0, away.output
    assert "billing: cannot reach the billing service" in away.stderr
    assert away.stdout.splitlines()[0].startswith("1 jobs: ")
    none = await scheduler.cli("acct", "--tenant", "nobody", "--no-charges", "-o", "json")
    assert none.exit_code == 0 and json.loads(none.stdout) == {"jobs": []}

    # Paged: newest first, one job a page, --continue to the end; every job once.
    argv = ["acct", "--queue", "acme", "--no-charges", "-o", "csv", "--scheduler", scheduler.address]

    def run(extra: Sequence[str]) -> Result:
        return RUNNER.invoke(app, [*argv, *extra])

    def parse(stdout: str) -> list[tuple[str, str]]:
        return [(row["submitted"], row["id"]) for row in csv.DictReader(io.StringIO(stdout))]

    everything = parse((await asyncio.to_thread(run, ["--limit", "0"])).stdout)
    assert {done, cancelled} <= {job_id for _, job_id in everything}
    pages = await asyncio.to_thread(follow, run, parse, 1)
    assert_pages(pages, everything, newest=lambda row: row[0])
    garbage = await asyncio.to_thread(run, ["--continue", GARBAGE])
    assert garbage.exit_code == 3 and garbage.stderr.startswith("error: INVALID_ARGUMENT: page_token")


LOGS_JOB = """
name: {name}
queue: initech
tasks:
  - name: w
    resources: {{cpu: "1", memory: 1Gi, gpu: {gpus}}}
    command: python train.py
    duration: 10m
"""


async def test_job_logs_says_why_it_has_none_and_get_shows_the_queue_position(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    job = await scheduler.submit(write_spec(tmp_path, "logs", LOGS_JOB.format(name="logs-run", gpus=1)))
    task = await _placed(scheduler, job)
    await scheduler.lifecycle("TaskStarted", task, job, device_indices=[0], pid=7)
    await scheduler.state(job, pb.JOB_STATE_RUNNING)

    # The test's nodes have no agent serving logs: said, not an empty answer.
    result = await scheduler.cli("job", "logs", "logs-run")
    assert result.exit_code == 3, result.output
    assert f"FAILED_PRECONDITION: node {task.node_id} serves no task logs" in result.output
    result = await scheduler.cli("job", "logs", "logs-run", "--task", "ps")
    assert result.exit_code == 3, result.output
    assert f"NOT_FOUND: job {job} has no task 'ps' (tasks: w)" in result.output

    # A node whose agent advertises logs it does not answer for: the agent is away, not the scheduler.
    away = closed_address()
    snapshot = {
        **sample_records(default_registry().current("NodeSnapshot"))[0],
        **envelope(task.node_id),
        "node_id": task.node_id,
        "region": "cn-east",
        "labels": {node_labels.LOGS_ENDPOINT: away},
        "task_ids": [task.task_id],
    }
    await publish(
        scheduler.bootstrap, scheduler.prefix, "node.snapshots", task.node_id, "NodeSnapshot", snapshot
    )

    async def advertised() -> bool:
        nodes = (await scheduler.api.ListNodes(pb.ListNodesRequest())).nodes
        return any(n.labels.get(node_labels.LOGS_ENDPOINT) == away for n in nodes)

    await until(advertised, what="the node's logs endpoint")
    result = await scheduler.cli("job", "logs", "logs-run")
    assert result.exit_code == 4, result.output
    assert f"the agent of node {task.node_id} at {away} does not answer" in result.output

    # No node holds 5 GPUs: it waits, first in its queue, with no start to promise and why.
    big = await scheduler.submit(write_spec(tmp_path, "big", LOGS_JOB.format(name="logs-big", gpus=5)))
    shown = await scheduler.cli("job", "get", big)
    assert shown.exit_code == 0, shown.output
    assert "Queue position   1 of 1 waiting in initech" in shown.stdout
    assert "Estimated start  unknown: " in shown.stdout
    wide = await scheduler.cli("job", "list", "-q", "initech", "-s", "pending", "-o", "wide", "--no-headers")
    assert wide.stdout.split()[-2:] == ["1/1", "unknown"], wide.stdout
