"""`job describe` and `acct` rendering: the history tables, sacct-style durations, --since."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
import typer
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console, RenderableType

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.cli.acct import parse_since
from suanli.cli.render import description, duration

AT = Timestamp(seconds=1_767_225_600)  # 2026-01-01 00:00:00Z
LATER = Timestamp(seconds=1_767_225_600 + 3723)


def text(renderable: RenderableType) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_durations_read_like_sacct() -> None:
    assert duration(0) == "00:00:00"
    assert duration(3723.4) == "01:02:03"
    assert duration(2 * 86400 + 61) == "2-00:01:01"


def test_since_takes_an_instant_or_a_span_back_from_now() -> None:
    now = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_since("12h", now) == datetime(2026, 1, 31, 0, tzinfo=UTC)
    assert parse_since("7d", now) == datetime(2026, 1, 24, 12, tzinfo=UTC)
    assert parse_since("2026-01-02", now) == datetime(2026, 1, 2, tzinfo=UTC)
    assert parse_since("2026-01-02T10:00Z", now) == datetime(2026, 1, 2, 10, tzinfo=UTC)
    with pytest.raises(typer.BadParameter, match="a span back from now"):
        parse_since("yesterday", now)


def test_describe_shows_accounting_attempts_and_events() -> None:
    described = pb.JobDescription(
        job=pb.Job(id="job-1", spec=pb.JobSpec(name="train", queue="acme"), state=pb.JOB_STATE_CANCELLED),
        events=[
            pb.HistoryEvent(at=AT, type="JobSubmitted", message="submitted to queue acme (1 task)"),
            pb.HistoryEvent(
                at=LATER,
                type="TaskPreempted",
                task_id="job-1-w-0",
                attempt=1,
                message="preempted by job job-9",
                by="job-9",
            ),
        ],
        attempts=[
            pb.TaskAttempt(
                task_id="job-1-w-0",
                attempt=1,
                node_id="n1",
                region="cn-east",
                gpu_indices=[0, 1],
                gpu_milli=[1000, 500],
                placed_at=AT,
                started_at=AT,
                ended_at=LATER,
                outcome="PREEMPTED",
                exit_code=143,
                running_s=3723,
                gpu_hours=1.5 * 3723 / 3600,
            )
        ],
        accounting=pb.JobAccounting(attempts=2, elapsed_s=3723, gpu_hours=1.551, cost=3.1),
    )
    shown = text(description(described))
    assert "GPU-hours      1.551" in shown and "Expected cost  3.1000" in shown
    lines = [line.split() for line in shown.splitlines()]
    assert [
        "job-1-w-0", "1", "n1", "cn-east", "0,1@0.5", "2026-01-01", "00:00:00Z", "2026-01-01", "01:02:03Z",
        "01:02:03", "PREEMPTED", "143",
    ] in lines  # fmt: skip
    assert [
        "2026-01-01",
        "01:02:03Z",
        "TaskPreempted",
        "job-1-w-0",
        "1",
        "preempted",
        "by",
        "job",
        "job-9",
    ] in lines
