"""Rendering scheduler answers: tables for people, JSON/YAML for scripts."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console, RenderableType

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.output import Format, dump, rows_table
from suanli.cli.render import (
    amount,
    event_line,
    explanation,
    job_detail,
    jobs_rows,
    nodes_rows,
    parse_state,
    queues_rows,
    state_name,
    to_data,
)
from suanli.jobspec import parse_jobspec, to_proto

AT = Timestamp(seconds=1_767_225_600)  # 2026-01-01 00:00:00Z


def text(renderable: RenderableType) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def rows(renderable: RenderableType) -> list[list[str]]:
    return [line.split() for line in text(renderable).splitlines() if line.strip()]


def sample_job() -> pb.Job:
    spec = to_proto(
        parse_jobspec(
            "name: llm-chat\nqueue: acme/serving\nkind: inference\n"
            "tasks: [{name: server, replicas: 3, resources: {gpu: 0.3}}]"
        )
    )
    return pb.Job(
        id="j-1",
        spec=spec,
        state=pb.JOB_STATE_RUNNING,
        submitted_at=AT,
        updated_at=AT,
        tasks=[
            pb.TaskStatus(
                task_id="j-1-server-0",
                state="RUNNING",
                node_id="n1",
                gpu_indices=[2],
                gpu_milli=[300],
                region="tokyo",
                rtt_ms=7.25,
                price_per_hour=0.0123,
            ),
            pb.TaskStatus(
                task_id="j-1-server-1",
                state="FAILED",
                node_id="n2",
                gpu_indices=[0],
                gpu_milli=[300],
                attempt=1,
                exit_code=137,
                reason="OOMKilled",
            ),
            pb.TaskStatus(task_id="j-1-server-2", state="PENDING"),
        ],
    )


@pytest.mark.parametrize(
    ("state", "name"),
    [
        (pb.JOB_STATE_PENDING, "Pending"),
        (pb.JOB_STATE_CANCELLED, "Cancelled"),
        (0, "Unspecified"),
        (99, "Unspecified"),
    ],
)
def test_state_name(state: int, name: str) -> None:
    assert state_name(state) == name


@pytest.mark.parametrize("given", ["running", "RUNNING", "Running", "JOB_STATE_RUNNING"])
def test_parse_state(given: str) -> None:
    assert parse_state(given) == pb.JOB_STATE_RUNNING


@pytest.mark.parametrize("given", ["unspecified", "done", ""])
def test_parse_state_rejects(given: str) -> None:
    with pytest.raises(ValueError, match="one of pending, running, succeeded, failed, cancelled"):
        parse_state(given)


def test_jobs_table() -> None:
    pending = pb.Job(
        id="j-2",
        spec=pb.JobSpec(name="etl", queue="acme/data"),
        state=pb.JOB_STATE_PENDING,
        pending_reason=pb.PendingReason(code="QUOTA_EXCEEDED", message="cpu over quota"),
    )
    assert rows(rows_table(jobs_rows([sample_job(), pending]))) == [
        ["ID", "NAME", "QUEUE", "KIND", "STATE", "TASKS", "GPU", "SUBMITTED", "REASON"],
        ["j-1", "llm-chat", "acme/serving", "inference", "Running", "1/3", "0.9", "2026-01-01", "00:00:00Z"],
        ["j-2", "etl", "acme/data", "batch", "Pending", "0/0", "0", "-", "QUOTA_EXCEEDED"],
    ]


def test_job_detail_shows_where_each_task_runs() -> None:
    job = sample_job()
    job.pending_reason.code = "GANG_INCOMPLETE"
    job.pending_reason.message = "2 of 3 tasks placed"
    shown = rows(job_detail(job))
    assert ["State", "Running"] in shown
    assert ["Gang", "3", "of", "3", "tasks"] in shown
    assert ["Pending", "GANG_INCOMPLETE:", "2", "of", "3", "tasks", "placed"] in shown
    assert ["j-1-server-0", "RUNNING", "n1", "tokyo", "7.2", "ms", "0.0123", "2@0.3", "0", "-"] in shown
    assert ["j-1-server-1", "FAILED", "n2", "-", "-", "-", "0@0.3", "1", "137", "OOMKilled"] in shown
    assert ["j-1-server-2", "PENDING", "-", "-", "-", "-", "-", "0", "-"] in shown


def test_job_detail_shows_the_network_fields_the_regions_and_the_price() -> None:
    job = sample_job()
    job.spec.data_region = "tokyo"
    job.spec.max_rtt_ms = 30
    job.spec.locality = pb.LOCALITY_ZONE
    job.regions.append("tokyo")
    job.price_per_hour = 0.5
    shown = rows(job_detail(job))
    assert ["Network", "data", "region", "tokyo,", "max", "RTT", "30", "ms,", "locality", "zone"] in shown
    assert ["Regions", "tokyo"] in shown
    assert ["Price", "/", "h", "0.5000"] in shown
    assert ["Network", "-"] in rows(job_detail(sample_job()))


def test_json_and_yaml_use_proto_field_names() -> None:
    data = to_data(sample_job())
    assert json.loads(dump(data, Format.JSON)) == data
    assert yaml.safe_load(dump(data, Format.YAML)) == data
    assert data["state"] == "JOB_STATE_RUNNING"
    assert data["spec"]["tasks"][0]["resources"]["gpu_milli"] == 300
    assert data["tasks"][0]["gpu_indices"] == [2]
    assert data["submitted_at"] == "2026-01-01T00:00:00Z"
    assert data["restarts"] == 0  # unset scalars are printed, so scripts can rely on every key


def test_event_line() -> None:
    event = pb.JobEvent(
        job_id="j-1",
        state=pb.JOB_STATE_RUNNING,
        event="TaskStarted",
        message="on n1",
        at=AT,
        task_id="j-1-server-0",
        attempt=2,
    )
    assert text(event_line(event)).strip() == (
        "2026-01-01 00:00:00Z  Running    TaskStarted j-1-server-0 (attempt 2): on n1"
    )


def test_explain_pending() -> None:
    explained = pb.Explanation(
        job_id="j-2",
        state=pb.JOB_STATE_PENDING,
        pending_reason=pb.PendingReason(
            code="NO_NODE_FITS",
            message="no node has 4 free GPUs",
            details={"gpu_milli": "4000", "nodes": "12"},
        ),
        rejected_by_filter={"gpu_model": 3, "fit": 9, "region": 3},
    )
    assert rows(explanation(explained)) == [
        ["Job", "j-2"],
        ["State", "Pending"],
        ["Reason", "NO_NODE_FITS"],
        ["Message", "no", "node", "has", "4", "free", "GPUs"],
        ["gpu_milli", "4000"],
        ["nodes", "12"],
        ["FILTER", "NODES", "REJECTED"],
        ["fit", "9"],
        ["gpu_model", "3"],
        ["region", "3"],
    ]


def test_explain_network_constraint_shows_each_region() -> None:
    explained = pb.Explanation(
        job_id="j-4",
        state=pb.JOB_STATE_PENDING,
        pending_reason=pb.PendingReason(
            code="NETWORK_CONSTRAINT",
            message="no region meets the network constraint",
            details={"data_region": "tokyo", "regions": "[...]"},
        ),
        regions=[
            pb.RegionVerdict(region="dallas", verdict="RTT 140.0 ms to tokyo > max_rtt_ms 50"),
            pb.RegionVerdict(region="osaka", verdict="link to tokyo is DOWN"),
        ],
    )
    shown = rows(explanation(explained))
    assert ["data_region", "tokyo"] in shown
    assert not any(row[0] == "regions" for row in shown)  # the table below says it better
    assert shown[-3:] == [
        ["REGION", "VERDICT"],
        ["dallas", "RTT", "140.0", "ms", "to", "tokyo", ">", "max_rtt_ms", "50"],
        ["osaka", "link", "to", "tokyo", "is", "DOWN"],
    ]


def test_explain_placed_shows_scores_per_plugin() -> None:
    explained = pb.Explanation(
        job_id="j-1",
        state=pb.JOB_STATE_RUNNING,
        top_nodes=[
            pb.NodeScore(node_id="n1", score=87.5, plugin_scores={"fgd": 60.0, "binpack": 27.5}),
            pb.NodeScore(node_id="n2", score=40.0, plugin_scores={"fgd": 40.0}),
        ],
    )
    assert rows(explanation(explained))[2:] == [
        ["NODE", "SCORE", "BINPACK", "FGD"],
        ["n1", "87.50", "27.50", "60.00"],
        ["n2", "40.00", "-", "40.00"],
    ]


def test_explain_without_a_decision() -> None:
    assert "nothing to explain" in text(explanation(pb.Explanation(job_id="j-3")))


def test_nodes_table() -> None:
    node = pb.Node(
        id="n1",
        region="cn-east",
        zone="cn-east-a",
        status="Ready",
        cpu_milli=64000,
        free_cpu_milli=60500,
        memory_mib=512 * 1024,
        free_memory_mib=384 * 1024,
        devices=[pb.Device(index=i, model="A100", free_milli=m) for i, m in enumerate([1000, 700, 0, 1000])],
    )
    cpu_only = pb.Node(
        id="n2",
        region="cn-east",
        zone="cn-east-b",
        status="Lost",
        cpu_milli=8000,
        free_cpu_milli=8000,
        memory_mib=32768,
        free_memory_mib=32768,
    )
    assert rows(rows_table(nodes_rows([node, cpu_only])))[1:] == [
        ["n1", "cn-east", "cn-east-a", "Ready", "60.5/64", "384Gi/512Gi", "4x", "A100", "2.7/4"],
        ["n2", "cn-east", "cn-east-b", "Lost", "8/8", "32Gi/32Gi", "-", "-"],
    ]


@pytest.mark.parametrize(
    ("flavour", "value", "shown"),
    [
        ("cpu", 16000, "16"),
        ("cpu", 2500, "2.5"),
        ("memory", 65536, "64Gi"),
        ("gpu:A100", 2500, "2.5"),
        ("pods", 7, "7"),
    ],
)
def test_amount_in_the_flavours_unit(flavour: str, value: int, shown: str) -> None:
    assert amount(flavour, value) == shown


def test_queues_table() -> None:
    vision = pb.Queue(
        name="acme/vision",
        cohort="acme",
        pending_jobs=2,
        running_jobs=5,
        dominant_share=0.625,
        resources=[
            pb.ResourceAmount(
                flavour="gpu:A100",
                guaranteed=8000,
                maximum=16000,
                used=10000,
                borrowed=2000,
                borrowing_limit=4000,
            ),
            pb.ResourceAmount(flavour="cpu", guaranteed=64000, used=32000, lending_limit=0),
        ],
    )
    idle = pb.Queue(name="acme/data", stopped=True)
    assert rows(rows_table(queues_rows([vision, idle])))[1:] == [
        ["acme/vision", "acme", "2", "5", "0.62", "gpu:A100", "10", "8", "16", "2", "4", "-", "125%"],
        ["cpu", "32", "64", "-", "-", "-", "0", "50%"],
        ["acme/data", "(stopped)", "-", "0", "0", "0.00", "-", "0", "0", "-", "-", "-", "-", "-"],
    ]
