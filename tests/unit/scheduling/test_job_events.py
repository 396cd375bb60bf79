"""The job's typed events: every one folds through the handler table, and converts to the record the
store has always held and back (so stores written before the typed events replay unchanged)."""

from __future__ import annotations

import typing
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from suanli.contracts import decode, encode, new_envelope
from suanli.contracts.catalogue import EVENTS
from suanli.scheduling.domain.jobs import (
    FOLD,
    AcceptedSpec,
    AcceptedTask,
    Cause,
    DeviceShare,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobRequeued,
    JobSubmitted,
    JobSucceeded,
    Phase,
    PlacedRequests,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskRunState,
    TaskStarted,
    TaskStopRequested,
    cancel,
    event_name,
    evolve,
    follow_ups,
    submitted,
)
from suanli.scheduling.domain.model import TaskPlacement
from suanli.scheduling.service_layer.cycle import placed
from suanli.scheduling.service_layer.payloads import JOB_EVENTS, body, parse

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = AcceptedSpec(
    name="train",
    queue="acme/vision",
    tasks=(
        AcceptedTask(
            "job-1-w-0",
            "w-0",
            cpu_milli=4000,
            memory_mib=8192,
            gpu_count=1,
            gpu_milli=500,
            gpu_memory_mib=1024,
            gpu_models=("A100",),
            node_selector=(("zone", "a"),),
            regions=("cn-north",),
            argv=("python", "train.py"),
            env=(("A", "1"), ("B", "2")),  # sorted, as validation leaves it
            duration_s=30.0,
        ),
        AcceptedTask("job-1-w-1", "w-1", cpu_milli=1000, memory_mib=512),
    ),
    kind="TRAINING",
    priority=10,
    priority_class="high",
    min_available=2,
    max_retries=1,
    labels=(("team", "cv"),),
    request_id="r-1",
    data_region="cn-north",
    max_rtt_ms=25.0,
    locality="zone",
)
PLACED = TaskPlaced(
    "job-1",
    "job-1-w-0",
    "n1",
    "cn-north",
    "s1",
    (DeviceShare(2, 500),),
    PlacedRequests(4000, 8192, 1, 500, 1024, "A100"),
    attempt=1,
    cycle=7,
    command=("python", "train.py"),
    env=(("B", "2"), ("A", "1"), ("SUANLI_SIM_DURATION_S", "30.0")),
    duration_s=30.0,
    queue="acme/vision",
    tenant="acme",
    rtt_ms=3.5,
    price_per_hour=0.42,
)
EVERY_EVENT: list[JobEvent] = [
    JobSubmitted("job-1", SPEC),
    PLACED,
    TaskStarted("job-1-w-0", "job-1", "n1", 1, (2,), 4242),
    TaskFinished("job-1-w-0", "job-1", "n1", 1, 0),
    TaskFailed("job-1-w-0", "job-1", "n1", 1, "oom", "OOM", 137),
    TaskFailed("job-1-w-0", "job-1", "n1", 1, "node n1 was lost", "NODE_LOST", None),
    TaskPreempted("job-1", "job-1-w-0", "n1", 1, "preempted by job-2", "job-2"),
    TaskStopRequested("job-1", "job-1-w-0", "n1", 1, "job cancelled: no"),
    JobRequeued("job-1", "acme", "acme/vision", 2, 1, Cause.TASK_FAILED, "oom", "job-1-w-0"),
    JobSucceeded("job-1", "acme", "acme/vision"),
    JobFailed("job-1", "acme", "acme/vision", "retries exhausted (1)", "job-1-w-0"),
    JobCancelled("job-1", "no longer needed", "ipv4:127.0.0.1"),
]


def _stored(event: JobEvent) -> dict[str, typing.Any]:
    """Encoded as the writer stores it, decoded as the projection reads it."""
    name, record = event_name(event), body(event)
    envelope = new_envelope(
        "scheduling", str(record[EVENTS[name].key]), event_id=uuid.uuid4(), occurred_at=T0
    )
    decoded_name, decoded = decode(encode(name, {**envelope, **record}))
    assert decoded_name == name
    return decoded


def test_every_event_of_the_catalogue_a_job_stream_holds_has_a_type_a_fold_and_a_parser() -> None:
    types = set(typing.get_args(JobEvent))
    assert {t.__name__ for t in types} == JOB_EVENTS <= set(EVENTS)
    assert set(FOLD) == types - {JobSubmitted}  # a JobSubmitted starts a job instead
    assert {type(e) for e in EVERY_EVENT} == types


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: event_name(e))
def test_an_event_survives_the_store_and_the_wire(event: JobEvent) -> None:
    assert parse(event_name(event), body(event)) == event
    assert parse(event_name(event), _stored(event)) == event


def test_records_are_those_the_store_has_always_held() -> None:
    # Written out by hand as the scheduler wrote them before its events were typed: the Avro bytes of a
    # typed event's record must be these records' bytes, or existing stores and consumers would diverge.
    job = submitted(JobSubmitted("job-1", SPEC), 1, T0)
    assert body(
        placed(job, TaskPlacement("job-1-w-0", "n1", (2,), (500,)), 7, {"n1": ("cn-north", "s1")})
    ) == {
        "job_id": "job-1",
        "task_id": "job-1-w-0",
        "node_id": "n1",
        "region": "cn-north",
        "site": "s1",
        "devices": [{"index": 2, "milli": 500}],
        "requests": {
            "cpu_milli": 4000,
            "memory_mib": 8192,
            "gpu_count": 1,
            "gpu_milli": 500,
            "gpu_memory_mib": 1024,
            "gpu_model": "A100",
        },
        "attempt": 1,
        "cycle": 7,
        "command": ["python", "train.py"],
        "env": {"A": "1", "B": "2", "SUANLI_SIM_DURATION_S": "30.0"},
        "duration_s": 30.0,
        "queue": "acme/vision",
        "tenant": "acme",
        "best_effort": False,
        # TaskPlaced v3: what placement knew (none here: no data region, no price book)
        "rtt_ms": None,
        "price_per_hour": None,
    }
    assert body(JobRequeued("job-1", "acme", "acme/vision", 2, 1, Cause.PREEMPTED, "preempted", None)) == {
        "job_id": "job-1",
        "tenant": "acme",
        "queue": "acme/vision",
        "attempt": 2,
        "restarts": 1,
        "cause": "PREEMPTED",
        "reason": "preempted",
        "failed_task_id": None,
    }
    assert body(TaskFailed("t", "job-1", "n1", 1, "node n1 was lost", "NODE_LOST", None)) == {
        "task_id": "t",
        "job_id": "job-1",
        "node_id": "n1",
        "attempt": 1,
        "reason": "node n1 was lost",
        "kind": "NODE_LOST",
        "exit_code": None,
    }
    submitted_record = body(JobSubmitted("job-1", SPEC))
    assert submitted_record["tenant"] == "acme" and submitted_record["max_runtime_s"] is None
    assert (submitted_record["data_region"], submitted_record["max_rtt_ms"]) == ("cn-north", 25.0)
    assert (submitted_record["locality"], submitted_record["min_bandwidth_gbps"]) == ("zone", None)
    assert submitted_record["tasks"][1]["requests"]["gpu_milli"] == 1000  # no GPU: a whole one, as before
    # v4: the environment is stored once in `envs`; the task points at it (its own env stays empty).
    assert (
        submitted_record["envs"][submitted_record["tasks"][0]["env_ref"]] == {"A": "1", "B": "2"}
        and submitted_record["tasks"][0]["env"] == {}
        and submitted_record["tasks"][0]["args"] == []
    )


def test_the_env_of_a_placement_keeps_its_order_on_the_wire() -> None:
    # Avro writes a map in the order given: a reordered env would change the stored bytes.
    assert list(_stored(PLACED)["env"]) == ["B", "A", "SUANLI_SIM_DURATION_S"]


def test_a_gang_folds_from_placement_to_success() -> None:
    job = submitted(JobSubmitted("job-1", SPEC), 1, T0)
    version = 1
    for task in job.tasks:
        version += 1
        job = evolve(
            job, placed(job, TaskPlacement(task.task_id, "n1"), 1, {}), version, T0 + timedelta(seconds=1)
        )
    assert [t.state for t in job.tasks] == [TaskRunState.PLACED] * 2 and job.phase is Phase.PENDING
    for task in job.tasks:
        version += 1
        job = evolve(job, TaskStarted(task.task_id, job.id, "n1", 1), version, T0 + timedelta(seconds=2))
    assert job.phase is Phase.RUNNING and job.version == version
    for task in job.tasks:
        version += 1
        job = evolve(job, TaskFinished(task.task_id, job.id, "n1", 1, 0), version, T0 + timedelta(seconds=3))
    assert follow_ups(job) == [JobSucceeded("job-1", "acme", "acme/vision")]
    job = evolve(job, JobSucceeded("job-1", "acme", "acme/vision"), version + 1, T0 + timedelta(seconds=3))
    assert job.phase is Phase.SUCCEEDED and job.message == "succeeded" and follow_ups(job) == []


def test_a_failed_task_stops_its_sibling_then_requeues_the_gang() -> None:
    job = submitted(JobSubmitted("job-1", SPEC), 1, T0)
    for n, task in enumerate(job.tasks, start=2):
        job = evolve(job, placed(job, TaskPlacement(task.task_id, "n1"), 1, {}), n, T0)
    first, second = job.tasks
    job = evolve(job, TaskFailed(first.task_id, job.id, "n1", 1, "oom", "OOM", 137), 4, T0)
    assert job.tasks[0].state is TaskRunState.FAILED and job.tasks[0].reason == "OOM: oom"
    (stop,) = follow_ups(job)
    assert stop == TaskStopRequested(
        job.id, second.task_id, "n1", 1, f"task {first.task_id} of the gang ended: OOM: oom"
    )
    job = evolve(job, stop, 5, T0)
    assert job.tasks[1].state is TaskRunState.STOPPING and follow_ups(job) == []
    job = evolve(job, TaskFailed(second.task_id, job.id, "n1", 1, "stopped", "KILLED", -15), 6, T0)
    (requeue,) = follow_ups(job)
    assert isinstance(requeue, JobRequeued) and requeue.cause is Cause.TASK_FAILED and requeue.attempt == 2
    job = evolve(job, requeue, 7, T0)
    assert (
        job.waiting
        and job.failures == 1
        and job.restarts == 1
        and job.message == "requeued (TASK_FAILED): OOM: oom"
    )


def test_cancel_stops_what_runs_and_is_final() -> None:
    job = submitted(JobSubmitted("job-1", SPEC), 1, T0)
    job = evolve(job, placed(job, TaskPlacement(job.tasks[0].task_id, "n1"), 1, {}), 2, T0)
    events = cancel(job, "no longer needed", "me")
    assert [event_name(e) for e in events] == ["TaskStopRequested", "JobCancelled"]
    for version, event in enumerate(events, start=3):
        job = evolve(job, event, version, T0)
    assert job.phase is Phase.CANCELLED and job.message == "no longer needed"
    assert job.tasks[0].state is TaskRunState.STOPPING  # its room is held until the node reports the end
