"""`suanli queue ...` against the real scheduling service: what the commands print and exit with, and
what the scheduler then holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .clikit import Scheduler

pytestmark = pytest.mark.timeout(120)

QUEUE_FILE = """
priority_classes: {cli-urgent: 700}
queues:
  - {name: acme/f1/g, quotas: {gpu:A100: 1000}}
  - name: acme/f1
    cohort: files
    quotas:
      gpu:A100: {guaranteed: 2000, maximum: 4000}
"""


async def _queue(s: Scheduler, name: str) -> pb.Queue:
    return await s.api.GetQueue(pb.GetQueueRequest(name=name))


async def test_create_update_list_and_delete_a_queue(scheduler: Scheduler) -> None:
    s = scheduler
    made = await s.cli(
        "queue", "create", "acme/cli-q", "--quota", "gpu:A100=2000,borrow=1000", "--cohort", "c1"
    )
    assert made.exit_code == 0, made.output
    assert made.stdout.strip() == "queue acme/cli-q created"
    queue = await _queue(s, "acme/cli-q")
    assert (queue.cohort, queue.resources[0].guaranteed, queue.resources[0].borrowing_limit) == (
        "c1",
        2000,
        1000,
    )

    listed = await s.cli("queue", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    rows = {q["name"]: q for q in json.loads(listed.stdout)["queues"]}
    assert rows["acme/cli-q"]["resources"][0]["borrowing_limit"] == "1000"
    table = await s.cli("queue", "list")
    line = next(row for row in table.stdout.splitlines() if row.startswith("acme/cli-q"))
    assert line.split()[:2] == ["acme/cli-q", "c1"]
    assert "BORROW LIMIT" in table.stdout and "LEND LIMIT" in table.stdout

    changed = await s.cli(
        "queue", "update", "acme/cli-q", "--quota", "gpu:A100=3000", "--quota", "cpu=8000", "--no-cohort"
    )
    assert changed.exit_code == 0, changed.output
    queue = await _queue(s, "acme/cli-q")
    assert queue.cohort == ""
    assert [(r.flavour, r.guaranteed, r.HasField("borrowing_limit")) for r in queue.resources] == [
        ("gpu:A100", 3000, False),
        ("cpu", 8000, False),
    ]
    stopped = await s.cli("queue", "update", "acme/cli-q", "--remove-quota", "cpu", "--stop")
    assert stopped.exit_code == 0, stopped.output
    queue = await _queue(s, "acme/cli-q")
    assert queue.stopped and [r.flavour for r in queue.resources] == ["gpu:A100"]

    gone = await s.cli("queue", "delete", "acme/cli-q")
    assert (gone.exit_code, gone.stdout.strip()) == (0, "queue acme/cli-q deleted")
    missing = await s.cli("queue", "get", "acme/cli-q")
    assert missing.exit_code == 3 and "NOT_FOUND: queue 'acme/cli-q' not found" in missing.stderr


async def test_a_queue_file_creates_parents_first_and_deletes_refuse_with_children(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    s = scheduler
    path = tmp_path / "more-queues.yaml"
    path.write_text(QUEUE_FILE)
    made = await s.cli("queue", "create", "-f", str(path))
    assert made.exit_code == 0, made.output
    assert made.stdout.splitlines() == [
        "queue acme/f1 created",
        "queue acme/f1/g created",
        "priority class cli-urgent = 700",
    ]
    parent = await _queue(s, "acme/f1")
    assert (parent.cohort, parent.resources[0].maximum) == ("files", 4000)

    refused = await s.cli("queue", "delete", "acme/f1")
    assert refused.exit_code == 3
    assert (
        "FAILED_PRECONDITION: queue 'acme/f1' has child queue(s) acme/f1/g; delete them first"
        in refused.stderr
    )

    classes = await s.cli("queue", "priority-class", "list", "-o", "yaml")
    assert classes.exit_code == 0 and "name: cli-urgent" in classes.stdout
    reset = await s.cli("queue", "priority-class", "set", "cli-urgent", "800")
    assert (reset.exit_code, reset.stdout.strip()) == (0, "priority class cli-urgent = 800")
    dropped = await s.cli("queue", "priority-class", "delete", "cli-urgent")
    assert (dropped.exit_code, dropped.stdout.strip()) == (0, "priority class cli-urgent deleted")

    for name in ("acme/f1/g", "acme/f1"):
        done = await s.cli("queue", "delete", name)
        assert done.exit_code == 0, done.output


async def test_bad_input_is_refused_with_the_field_or_the_option_named(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    s = scheduler
    server = await s.cli("queue", "create", "acme/bad", "--quota", "gpus=1000")
    assert server.exit_code == 3
    assert (
        "INVALID_ARGUMENT: queue.quotas[0].flavour: must be 'cpu', 'memory' or 'gpu:<model>' (got 'gpus')"
        in server.stderr
    )
    local = await s.cli("queue", "create", "acme/bad", "--quota", "gpu:A100")
    assert local.exit_code == 2 and "--quota" in local.output
    exists = await s.cli("queue", "create", "acme", "--quota", "gpu:A100=1")
    assert exists.exit_code == 3 and "ALREADY_EXISTS: queue 'acme' already exists" in exists.stderr
    path = tmp_path / "broken.yaml"
    path.write_text("queues:\n  - {name: acme/z, quotas: {gpu:A100: -1}}\n")
    broken = await s.cli("queue", "create", "-f", str(path))
    assert broken.exit_code == 2
    assert 'queues[0].quotas["gpu:A100"].guaranteed: must be an integer >= 0, got -1' in broken.stderr
