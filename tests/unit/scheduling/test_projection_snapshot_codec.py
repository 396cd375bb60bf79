"""The projection snapshot's codec: a state holding every kind of field the projection has (nested
dataclasses, enums, tuples, unions, optionals, dicts) reads back equal, a snapshot written before
defaults were left out reads back too, and bytes that are not a state are a StateDecodeError, after which
a starting scheduler folds the store from position 0 instead."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from suanli.eventstore import InMemorySnapshots, Snapshot
from suanli.infra.dataclass_json import StateDecodeError, dumps
from suanli.scheduling.domain.jobs import (
    AcceptedSpec,
    AcceptedTask,
    JobView,
    LostAttempt,
    Phase,
    TaskRun,
    TaskRunState,
)
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.service_layer.projection import AdminRequest, ProjectionState
from suanli.scheduling.service_layer.projection_snapshot import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_NAME,
    decode_state,
    encode_state,
    load_projection,
)

T0 = datetime(2026, 12, 2, 16, 0, tzinfo=UTC)


def _task(n: int, **extra: Any) -> AcceptedTask:
    return AcceptedTask(f"job-{n}-t0", "t0", **extra)


def _running_job() -> JobView:
    """A job with every field away from its default, down to its tasks' specs and lost attempts."""
    task = _task(
        1,
        cpu_milli=4000,
        memory_mib=16384,
        gpu_count=2,
        gpu_milli=500,
        gpu_memory_mib=40960,
        gpu_models=("A100", "H100"),
        node_selector=(("rack", "r1"),),
        regions=("eu",),
        argv=("train.py", "--lr", "0.1"),
        env=(("SEED", "7"),),
        duration_s=12.5,
    )
    spec = AcceptedSpec(
        name="train",
        queue="acme/vision",
        tasks=(task,),
        kind="TRAINING",
        priority=10,
        priority_class="high",
        preemptible=False,
        best_effort=True,
        min_available=1,
        max_retries=3,
        labels=(("team", "cv"),),
        request_id="r1",
        regions=("eu", "us"),
        data_region="eu",
        max_rtt_ms=20.0,
        locality="any",
        min_bandwidth_gbps=100.0,
    )
    run = TaskRun(
        task,
        state=TaskRunState.RUNNING,
        attempt=2,
        node_id="n1",
        gpu_indices=(0, 1),
        gpu_milli=(500, 500),
        exit_code=3,
        reason="requeued",
        since=T0 + timedelta(seconds=5),
        region="eu",
        rtt_ms=4.25,
        price_per_hour=2.0,
    )
    return JobView(
        id="job-1",
        spec=spec,
        seq=1,
        version=9,
        submitted_at=T0,
        updated_at=T0.astimezone(timezone(timedelta(hours=8))) + timedelta(minutes=1),
        tasks=(run,),
        phase=Phase.RUNNING,
        attempt=2,
        restarts=1,
        failures=1,
        preempted=True,
        message="placed",
        lost_attempts=(LostAttempt("job-1-t0", "n0", 1, T0 + timedelta(seconds=3)),),
    )


def _state() -> ProjectionState:
    waiting = JobView("job-2", AcceptedSpec("wait", "acme", (_task(2),)), 2, 1, T0, T0, (TaskRun(_task(2)),))
    return ProjectionState(
        position=42,
        seq=2,
        horizon=T0 + timedelta(hours=1),
        evicted=5,
        versions={"job-job-1": 9, "job-job-2": 1, "queue-acme": 3},
        jobs=(_running_job(), waiting),
        finished=(("job-0", T0 - timedelta(minutes=5)),),
        traces={"job-2": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        queues=(
            QueueSpec("acme", (ResourceQuota("gpu:A100", 4000, 8000, None, 1000),), cohort="all"),
            QueueSpec("acme/vision", stopped=True),
        ),
        priority_classes=(PriorityClass("high", 10), PriorityClass("low", -1)),
        admin_requests={
            "req-1": AdminRequest("QueueCreated", {"name": "acme", "quotas": [{"gpu:A100": 4}], "x": None})
        },
    )


def test_a_state_with_every_kind_of_field_reads_back_equal() -> None:
    state = _state()
    assert decode_state(encode_state(state)) == state
    empty = ProjectionState(0, 0, None, 0, {}, (), (), {}, (), (), {})
    assert decode_state(encode_state(empty)) == empty


def test_a_snapshot_written_with_every_field_reads_back_and_the_lean_one_is_smaller() -> None:
    state = _state()
    written_before = dumps(state)  # what snapshots held before defaults were left out: same format
    assert decode_state(written_before) == state
    waiting = json.loads(encode_state(state))["jobs"][1]
    assert waiting["tasks"] == [{"spec": {"name": "t0", "task_id": "job-2-t0"}}]
    assert len(encode_state(state)) < len(written_before)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x01garbage",
        b"[1, 2]",
        b'{"position": "x"}',
        encode_state(_state())[:-40],
        encode_state(_state()).replace(b'"RUNNING"', b'"SPRINTING"'),
        encode_state(_state()).replace(b'"jobs":[', b'"jobs":[7,'),
        encode_state(_state()).replace(b'"versions":{', b'"versions":{"job-x":"9",'),
        encode_state(_state()).replace(b'"finished":[["job-0",', b'"finished":[["job-0",1,'),
        encode_state(_state()).replace(b'"horizon":"', b'"horizon":"noon'),
    ],
)
def test_bytes_that_are_not_a_state_are_a_decode_error(data: bytes) -> None:
    with pytest.raises(StateDecodeError):
        decode_state(data)


async def test_an_unreadable_snapshot_is_logged_and_the_store_folded_from_zero(
    caplog: pytest.LogCaptureFixture,
) -> None:
    snapshots = InMemorySnapshots()
    await snapshots.save(Snapshot(SNAPSHOT_NAME, 42, SNAPSHOT_FORMAT, b'{"jobs": "abc"}'), keep=3)
    assert (await load_projection(snapshots)).position == 0
    assert "unreadable" in caplog.text and "folding from 0" in caplog.text
    await snapshots.save(Snapshot(SNAPSHOT_NAME, 43, SNAPSHOT_FORMAT, encode_state(_state())), keep=3)
    assert (await load_projection(snapshots)).state() == _state()
