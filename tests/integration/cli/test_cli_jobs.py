"""`suanli job|nodes|queues` against the real scheduling service: exit codes, parsed output, server state."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli import job as job_cli

from .clikit import NODES, QUEUE_NAMES, RUNNER, Scheduler, app, invoke, until, write_spec

pytestmark = pytest.mark.timeout(120)

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "jobs").glob("*.yaml"))

# One whole A100, placeable on any node of the capacity view.
ONE_GPU = """
name: {name}
queue: {queue}
max_retries: 0
tasks:
  - name: w
    resources: {{cpu: "1", memory: 1Gi, gpu: 1}}
    command: python train.py
    duration: 1h
"""
# One CPU, no GPU: the output tests' jobs leave the 12 GPUs to the tests that need a placement.
ONE_CPU = """
name: {name}
queue: {queue}
max_retries: 0
tasks:
  - name: w
    resources: {{cpu: "1", memory: 1Gi}}
    command: python etl.py
    duration: 1h
"""
# One task asking for 64 GPUs: no node has more than 4.
HUGE = """
name: huge
queue: acme/ops
tasks:
  - name: w
    resources: {cpu: "1", memory: 1Gi, gpu: {count: 64}}
"""


def field(table: str, name: str) -> str:
    """A value of `job get` / `job explain`'s field grid ("Name  value")."""
    found = re.search(rf"^{re.escape(name)}\s{{2,}}(.*?)\s*$", table, re.M)
    assert found, f"no {name!r} in:\n{table}"
    return found[1]


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.splitlines()[1:] if line.strip()]


async def json_of(scheduler: Scheduler, *args: str) -> Any:
    result = await scheduler.cli(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def placed_task(scheduler: Scheduler, job_id: str) -> pb.TaskStatus:
    async def probe() -> pb.TaskStatus | None:
        tasks = (await scheduler.job(job_id)).tasks
        return tasks[0] if tasks and tasks[0].node_id and tasks[0].state.lower() == "placed" else None

    return await until(probe, what=f"a placed task of {job_id}")


def assert_refused(result: Any, code: str, *needles: str) -> None:
    """Exit 3 with one line `error: CODE: details` on stderr, never a traceback."""
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"error: {code}: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    for needle in needles:
        assert needle in result.stderr, result.stderr


async def test_submit_examples_then_get_as_table_and_json(scheduler: Scheduler) -> None:
    assert len(EXAMPLES) == 3
    for path in EXAMPLES:
        doc = yaml.safe_load(path.read_text())
        job_id = await scheduler.submit(path)
        server = await scheduler.job(job_id)
        assert (server.spec.name, server.spec.queue) == (doc["name"], doc["queue"])
        replicas = sum(t.get("replicas", 1) for t in doc["tasks"])
        assert sum(t.replicas or 1 for t in server.spec.tasks) == replicas

        # Nothing reports these tasks started, so each job stays Pending (placed or not).
        table = await scheduler.cli("job", "get", job_id)
        assert table.exit_code == 0, table.output
        assert field(table.stdout, "ID") == job_id
        assert field(table.stdout, "Name") == doc["name"]
        assert field(table.stdout, "Queue") == doc["queue"]
        assert field(table.stdout, "Kind") == doc["kind"]
        assert field(table.stdout, "State") == "Pending"

        data = await json_of(scheduler, "job", "get", job_id)
        assert data["id"] == job_id and data["state"] == "JOB_STATE_PENDING"
        assert data["spec"]["name"] == doc["name"] and data["spec"]["queue"] == doc["queue"]
        assert data["spec"]["kind"] == f"JOB_KIND_{doc['kind'].upper()}"
        assert data["spec"]["priority_class"] == doc.get("priority_class", "")

    gang = yaml.safe_load((EXAMPLES[-1]).read_text())
    assert gang["name"] == "resnet50-ddp"
    # int64 fields travel as strings in the protobuf JSON mapping (docs/cli.md)
    resources = data["spec"]["tasks"][0]["resources"]
    assert (resources["cpu_milli"], resources["memory_mib"]) == ("8000", "65536")

    # --queue replaces the file's queue, and the server records it
    moved = await scheduler.cli("job", "submit", str(EXAMPLES[0]), "--queue", "acme/ops")
    assert moved.exit_code == 0, moved.output
    assert (await scheduler.job(moved.stdout.split()[1])).spec.queue == "acme/ops"
    assert "submitted to queue acme/ops (Pending)" in moved.stdout


async def test_list_follows_pages_with_state_and_queue_filters(
    scheduler: Scheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of 2 instead of 100: a handful of jobs then spans several pages of real server tokens.
    monkeypatch.setattr(job_cli, "PAGE_SIZE", 2)
    spec = write_spec(tmp_path, "listed", ONE_GPU.format(name="listed", queue="acme/lists"))
    ids = [await scheduler.submit(spec) for _ in range(5)]
    elsewhere = await scheduler.submit(spec, "--queue", "acme/ops")
    for job_id in ids[1:3]:
        assert (await scheduler.cli("job", "cancel", job_id)).exit_code == 0

    async def listed(*filters: str) -> list[str]:
        data = await json_of(scheduler, "job", "list", "--limit", "0", *filters)
        return [j["id"] for j in data["jobs"]]

    newest = ids[::-1]
    assert await listed("--queue", "acme/lists") == newest  # newest first, across 3 pages
    assert await listed("--queue", "acme/lists", "--oldest-first") == ids  # submission order
    assert await listed("--queue", "acme/lists", "--state", "pending") == [ids[4], ids[3], ids[0]]
    assert await listed("--queue", "acme/lists", "--state", "cancelled") == [ids[2], ids[1]]
    assert await listed("--queue", "acme/lists", "--state", "succeeded") == []
    everything = await listed()
    assert set(ids) | {elsewhere} <= set(everything)
    assert len(everything) == len((await scheduler.api.ListJobs(pb.ListJobsRequest(page_size=500))).jobs)

    # The output format deliberately changed: newest first, and the "more" hint (with the token to go on)
    # on stderr, so stdout is the table alone.
    table = await scheduler.cli("job", "list", "--queue", "acme/lists", "--limit", "3")
    assert table.exit_code == 0, table.output
    lines = table.stdout.strip().splitlines()
    assert lines[0].split()[:5] == ["ID", "NAME", "QUEUE", "KIND", "STATE"]
    assert [line.split()[0] for line in lines[1:4]] == newest[:3]
    assert [line.split()[4] for line in lines[1:4]] == ["Pending", "Pending", "Cancelled"]
    assert len(lines) == 4
    hint = re.fullmatch(r"\(first 3 shown; --continue (\S+) for more, --limit 0 lists all\)\n", table.stderr)
    assert hint, table.stderr

    # --continue goes on exactly where the first listing stopped, in the same order
    rest = await scheduler.cli("job", "list", "--queue", "acme/lists", "--continue", hint[1], "--no-headers")
    assert rest.exit_code == 0 and rest.stderr == "", rest.output
    assert [row.split()[0] for row in rest.stdout.strip().splitlines()] == newest[3:]
    # a token of one order is refused for the other (the server's INVALID_ARGUMENT names page_token)
    mixed = await scheduler.cli("job", "list", "-q", "acme/lists", "--continue", hint[1], "--oldest-first")
    assert_refused(mixed, "INVALID_ARGUMENT", "page_token")

    bad = await scheduler.cli("job", "list", "--state", "sleeping")
    assert bad.exit_code == 2 and "--state" in bad.stderr and "pending" in bad.stderr, bad.output


async def test_one_output_style_and_jobs_by_name(scheduler: Scheduler, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "named", ONE_CPU.format(name="named", queue="acme/named"))
    older, newer = await scheduler.submit(spec), await scheduler.submit(spec)
    other = await scheduler.submit(spec, "--queue", "acme/ops")  # the same name in another queue

    # a name is the newest job of that name; --queue narrows it to one queue (names are unique per queue)
    by_name = await json_of(scheduler, "job", "get", "named")
    assert by_name["id"] == other
    assert (await json_of(scheduler, "job", "get", "named", "-q", "acme/named"))["id"] == newer
    assert (await scheduler.cli("job", "get", older, "-o", "name")).stdout == f"job/{older}\n"
    assert_refused(await scheduler.cli("job", "get", "named", "-q", "globex"), "NOT_FOUND", "named", "globex")

    async def out(*args: str) -> str:
        result = await scheduler.cli("job", "list", "-q", "acme/named", *args)
        assert result.exit_code == 0, result.output
        return result.stdout

    assert await out("-o", "name") == f"job/{newer}\njob/{older}\n"
    assert await out("-o", "jsonpath={.jobs[*].id}") == f"{newer} {older}\n"
    template = "jsonpath={range .jobs[*]}{.id},{.spec.name}{'\\n'}{end}"
    assert await out("-o", template, "--oldest-first") == f"{older},named\n{newer},named\n"
    by_id = sorted([older, newer], reverse=True)
    assert [r.split()[0] for r in (await out("--sort-by", "-id", "--no-headers")).splitlines()] == by_id
    csv_lines = (await out("-o", "csv")).splitlines()
    assert csv_lines[0].startswith("id,name,queue,kind,state,") and csv_lines[1].startswith(f"{newer},named,")
    wide = (await out("-o", "wide")).splitlines()
    wide_columns = ["PRIORITY", "CLASS", "REGIONS", "NODES", "LABELS", "UPDATED", "POSITION", "EST", "START"]
    assert wide[0].split()[-9:] == wide_columns
    assert (
        await scheduler.cli("nodes", "-o", "name", "--sort-by", "-node")
    ).stdout == "node/w1\nnode/e2\nnode/e1\n"

    # `job get -o yaml` (and json) is a spec `job submit -f -` takes back: a copy of the job
    shown = await scheduler.cli("job", "get", older, "-o", "yaml")
    assert shown.exit_code == 0, shown.output
    again = await asyncio.to_thread(
        RUNNER.invoke, app, ["job", "submit", "-f", "-", "--scheduler", scheduler.address], input=shown.stdout
    )
    assert again.exit_code == 0, again.output
    copy = await scheduler.job(again.stdout.split()[1])
    original = await scheduler.job(older)
    assert copy.id != older and copy.spec.name == "named" and copy.spec.queue == "acme/named"
    assert list(copy.spec.tasks) == list(original.spec.tasks)
    for job_id in (older, newer, other, copy.id):
        await scheduler.api.CancelJob(pb.CancelJobRequest(job_id=job_id))


async def test_label_selectors_and_queue_subtrees(scheduler: Scheduler, tmp_path: Path) -> None:
    tagged = ONE_CPU.format(name="tagged", queue="acme/named") + "labels: {suite: tagged, tier: dev}\n"
    spec = write_spec(tmp_path, "tagged", tagged)
    first = await scheduler.submit(spec)
    second = await scheduler.submit(spec, "--queue", "acme/ops")
    plain = await scheduler.submit(write_spec(tmp_path, "plain", ONE_CPU.format(name="p", queue="acme/ops")))

    async def names(*args: str) -> list[str]:
        result = await scheduler.cli("job", "list", "-o", "name", *args)
        assert result.exit_code == 0, result.output
        return result.stdout.split()

    assert await names("-q", "acme", "--subtree", "-l", "suite=tagged") == [f"job/{second}", f"job/{first}"]
    assert await names("-q", "acme", "-l", "suite=tagged") == []  # without --subtree: the queue acme only
    assert await names("-q", "acme/ops", "-l", "suite!=tagged", "-l", "!tier", "--limit", "1") == [
        f"job/{plain}"
    ]

    # a filtered listing still continues exactly after the last job it showed
    page = await scheduler.cli(
        "job", "list", "-o", "name", "-q", "acme", "--subtree", "-l", "suite", "--limit", "1"
    )
    assert page.stdout.split() == [f"job/{second}"], page.output
    token = re.search(r"--continue (\S+)", page.stderr)
    assert token, page.stderr
    rest = await names("-q", "acme", "--subtree", "-l", "suite", "--continue", token[1])
    assert rest == [f"job/{first}"]

    under = await scheduler.cli("queues", "acme", "--subtree", "-o", "name")
    assert under.exit_code == 0, under.output
    assert set(under.stdout.split()) == {f"queue/{q}" for q in QUEUE_NAMES if q.startswith("acme")}
    for job_id in (first, second, plain):
        await scheduler.api.CancelJob(pb.CancelJobRequest(job_id=job_id))


async def test_cancel_then_get_shows_cancelled(scheduler: Scheduler, tmp_path: Path) -> None:
    job_id = await scheduler.submit(
        write_spec(tmp_path, "c", ONE_GPU.format(name="doomed", queue="acme/ops"))
    )
    await placed_task(scheduler, job_id)

    cancelled = await scheduler.cli("job", "cancel", job_id, "--reason", "superseded")
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout.strip() == f"job {job_id} cancelled"
    assert (await scheduler.job(job_id)).state == pb.JOB_STATE_CANCELLED

    table = await scheduler.cli("job", "get", job_id)
    assert table.exit_code == 0 and field(table.stdout, "State") == "Cancelled", table.output
    assert (await json_of(scheduler, "job", "get", job_id))["state"] == "JOB_STATE_CANCELLED"

    # docs/api.md: "Cancelling a cancelled job returns it" (a retried cancel is not an error)
    again = await scheduler.cli("job", "cancel", job_id)
    assert again.exit_code == 0 and again.stdout.strip() == f"job {job_id} cancelled", again.output

    # watching a job that is already over prints its state and exits with its outcome at once
    watched = await scheduler.cli("job", "watch", job_id)
    assert watched.exit_code == 1, watched.output
    assert watched.stdout.strip().splitlines()[-1].split()[2] == "Cancelled"


async def test_watch_exit_code_follows_the_reported_lifecycle(scheduler: Scheduler, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "w", ONE_GPU.format(name="watched", queue="acme/ops"))
    ok, bad = await scheduler.submit(spec), await scheduler.submit(spec)

    # ok: TaskStarted then TaskFinished(0) while `job watch` follows -> exit 0, last line Succeeded
    task = await placed_task(scheduler, ok)
    watcher = asyncio.create_task(scheduler.cli("job", "watch", ok))
    await scheduler.lifecycle("TaskStarted", task, ok, device_indices=[0], pid=7)
    await scheduler.state(ok, pb.JOB_STATE_RUNNING)
    await scheduler.lifecycle("TaskFinished", task, ok, exit_code=0)
    result = await asyncio.wait_for(watcher, 30)
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1].split()
    assert last[2] == "Succeeded" and last[3].rstrip(":") == "JobSucceeded", result.stdout
    assert (await scheduler.job(ok)).state == pb.JOB_STATE_SUCCEEDED

    # a finished job cannot be cancelled: the server's FAILED_PRECONDITION is exit 3
    assert_refused(await scheduler.cli("job", "cancel", ok), "FAILED_PRECONDITION", ok)

    # bad: the task fails with no retries left -> the job Fails and watch exits 1
    task = await placed_task(scheduler, bad)
    watcher = asyncio.create_task(scheduler.cli("job", "watch", bad))
    await scheduler.lifecycle("TaskStarted", task, bad, device_indices=[0], pid=8)
    await scheduler.state(bad, pb.JOB_STATE_RUNNING)
    await scheduler.lifecycle("TaskFailed", task, bad, reason="boom", kind="ERROR", exit_code=1)
    result = await asyncio.wait_for(watcher, 30)
    assert result.exit_code == 1, result.output
    assert result.stdout.strip().splitlines()[-1].split()[2] == "Failed", result.stdout
    assert (await scheduler.job(bad)).state == pb.JOB_STATE_FAILED


async def test_explain_says_why_a_job_cannot_fit(scheduler: Scheduler, tmp_path: Path) -> None:
    job_id = await scheduler.submit(write_spec(tmp_path, "huge", HUGE))
    try:

        async def reason() -> dict[str, Any] | None:
            data = await json_of(scheduler, "job", "explain", job_id)
            # an unset message field is left out of the JSON until the first cycle records a reason
            return data if data.get("pending_reason", {}).get("code") else None

        data = await until(reason, what="a pending reason")
        assert data["state"] == "JOB_STATE_PENDING"
        # 64 GPUs where the largest node has 4: no node could ever hold it, whatever else runs
        assert data["pending_reason"]["code"] == "UNSCHEDULABLE", data
        assert "asks for 64 GPUs on one node; the largest node has 4" in data["pending_reason"]["message"]
        # every node of the view was ruled out by some filter
        assert sum(data["rejected_by_filter"].values()) >= len(NODES), data

        table = await scheduler.cli("job", "explain", job_id)
        assert table.exit_code == 0, table.output
        assert field(table.stdout, "Job") == job_id and field(table.stdout, "State") == "Pending"
        assert field(table.stdout, "Reason") == "UNSCHEDULABLE"
        assert field(table.stdout, "Message") == data["pending_reason"]["message"]
        assert "NODES REJECTED" in table.stdout

        got = await scheduler.cli("job", "get", job_id)
        assert field(got.stdout, "Pending").startswith("UNSCHEDULABLE"), got.output
    finally:
        # a job that never fits would otherwise be tried by every cycle of the module's other tests
        await scheduler.api.CancelJob(pb.CancelJobRequest(job_id=job_id))


async def test_nodes_show_the_published_capacity_view(scheduler: Scheduler) -> None:
    data = await json_of(scheduler, "nodes")
    by_id = {n["id"]: n for n in data["nodes"]}
    assert set(by_id) == set(NODES)
    for node_id, region in NODES.items():
        node = by_id[node_id]
        assert node["region"] == region and node["cpu_milli"] == "64000"
        assert [d["model"] for d in node["devices"]] == ["A100"] * 4

    west = await json_of(scheduler, "nodes", "--region", "cn-west")
    assert [n["id"] for n in west["nodes"]] == ["w1"]

    table = await scheduler.cli("nodes", "--region", "cn-east")
    assert table.exit_code == 0, table.output
    body = {row[0]: row for row in rows(table.stdout)}
    assert set(body) == {"e1", "e2"}
    for row in body.values():
        assert row[1] == "cn-east" and row[4].endswith("/64") and "4x A100" in " ".join(row)


async def test_queues_list_and_one_queue(scheduler: Scheduler) -> None:
    data = await json_of(scheduler, "queues")
    assert set(QUEUE_NAMES) <= {q["name"] for q in data["queues"]}

    one = await json_of(scheduler, "queues", "acme/lists")
    assert one["name"] == "acme/lists"
    gpu = {r["flavour"]: r for r in one["resources"]}["gpu:A100"]
    assert gpu["guaranteed"] == "32000"

    table = await scheduler.cli("queues")
    assert table.exit_code == 0, table.output
    assert set(QUEUE_NAMES) <= {row[0] for row in rows(table.stdout)}

    assert_refused(await scheduler.cli("queues", "nobody/here"), "NOT_FOUND")


async def test_errors_name_the_field_and_set_the_exit_code(scheduler: Scheduler, tmp_path: Path) -> None:
    before = len((await scheduler.api.ListJobs(pb.ListJobsRequest(page_size=500))).jobs)

    # invalid on the client: exit 2, every problem named by its field, nothing sent
    invalid = write_spec(
        tmp_path,
        "invalid",
        "name: bad\nqueue: acme/ops\nkind: serving\ntasks:\n  - name: w\n    replicas: 0\n",
    )
    result = await scheduler.cli("job", "submit", str(invalid))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: invalid job spec {invalid}: 2 problems"), result.stderr
    assert (
        "  kind: must be one of" in result.stderr
        and "  tasks[0].replicas: must be 1..1000 (got 0)" in result.stderr
    )

    # valid on the client, refused by the server: exit 3 naming the wire field
    unknown_queue = write_spec(tmp_path, "q", ONE_GPU.format(name="lost", queue="acme/nowhere"))
    assert_refused(
        await scheduler.cli("job", "submit", str(unknown_queue)),
        "INVALID_ARGUMENT",
        "spec.queue",
        "acme/nowhere",
    )
    unknown_class = write_spec(
        tmp_path, "p", ONE_GPU.format(name="vip", queue="acme/ops") + "priority_class: vip\n"
    )
    assert_refused(
        await scheduler.cli("job", "submit", str(unknown_class)), "INVALID_ARGUMENT", "spec.priority_class"
    )
    assert len((await scheduler.api.ListJobs(pb.ListJobsRequest(page_size=500))).jobs) == before

    for command in ("get", "cancel", "watch", "explain"):
        assert_refused(await scheduler.cli("job", command, "no-such-job"), "NOT_FOUND", "no-such-job")

    # nothing listening: exit 4
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = await invoke("job", "get", "x", "--scheduler", f"127.0.0.1:{port}")
    assert down.exit_code == 4 and "cannot reach the scheduler" in down.stderr, down.output
