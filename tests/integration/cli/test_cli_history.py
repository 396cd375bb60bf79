"""`suanli job describe` and `suanli acct` against the real scheduling service: a job's history as a
person and a script read it, and accounting exported as CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
import socket
from pathlib import Path

import pytest
import yaml

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .clikit import Scheduler, until, write_spec

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
