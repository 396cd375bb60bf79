"""The scheduler's Writer contract: events, outbox rows and pending reasons commit together or not at
all; the store's version and duplicate checks reach the caller; the projection catches up with it all."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from writer_adapters import WriterUnderTest

from suanli.contracts import decode, new_envelope
from suanli.eventstore import ConcurrencyConflict, DuplicateEventId
from suanli.scheduling.service_layer.errors import NotLeader
from suanli.scheduling.service_layer.ports import Append, Outgoing
from suanli.scheduling.service_layer.projection import Projection

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _submitted(job_id: str) -> Outgoing:
    event_id = uuid.uuid4()
    record: dict[str, Any] = {
        **new_envelope("scheduling", job_id, event_id=event_id, occurred_at=AT),
        "job_id": job_id,
        "name": "j",
        "tenant": "acme",
        "queue": "acme",
        "priority": 0,
        "kind": "BATCH",
        "preemptible": True,
        "min_available": 1,
        "regions": [],
        "max_runtime_s": None,
        "tasks": [
            {
                "task_id": f"{job_id}-t0",
                "name": "t0",
                "requests": {"cpu_milli": 1000, "memory_mib": 512, "gpu_count": 0, "gpu_milli": 1000},
                "command": [],
                "args": [],
                "env": {},
            }
        ],
    }
    return Outgoing("JobSubmitted", record, event_id, {"seq": 1})


def _started(job_id: str, event_id: uuid.UUID | None = None) -> Outgoing:
    event_id = event_id or uuid.uuid4()
    record = {
        **new_envelope("agent", f"{job_id}-t0", event_id=event_id, occurred_at=AT),
        "task_id": f"{job_id}-t0",
        "job_id": job_id,
        "node_id": "n1",
        "attempt": 1,
    }
    return Outgoing("TaskStarted", record, event_id)


def _queue(name: str) -> Outgoing:
    event_id = uuid.uuid4()
    record = {
        **new_envelope("scheduling", name, event_id=event_id, occurred_at=AT),
        "name": name,
        "quotas": [],
    }
    return Outgoing("QueueRemoved", record, event_id)


async def _pending(subject: WriterUnderTest) -> dict[str, Any]:
    projection = Projection()
    await subject.writer.load_pending(projection)
    return projection.pending_reasons


async def test_a_commit_is_read_back_by_catch_up_and_only_scheduling_events_reach_the_outbox(
    subject: WriterUnderTest,
) -> None:
    writer = subject.writer
    await writer.commit(
        [Append("job-a", 0, [_submitted("a"), _started("a")]), Append("queue-q", 0, [_queue("q")])]
    )
    await writer.commit([Append("job-b", 0, [_submitted("b")])])
    projection = Projection()
    await writer.catch_up(projection)  # in batches of two on PostgreSQL
    assert set(projection.jobs) == {"a", "b"} and projection.versions == {
        "job-a": 2,
        "queue-q": 1,
        "job-b": 1,
    }
    assert projection.jobs["a"].version == 2 and projection.jobs["a"].seq == 1
    outbox = await subject.store.pending_outbox()
    assert [(r.topic, r.key, r.event_name) for r in outbox] == [
        ("t.jobs.events", b"a", "JobSubmitted"),
        ("t.jobs.events", b"b", "JobSubmitted"),
    ]
    assert decode(outbox[0].value)[1]["job_id"] == "a"
    await writer.catch_up(projection)
    assert projection.position == len(await subject.store.read_all())


async def test_pending_reasons_are_upserted_and_removed_with_the_commit(subject: WriterUnderTest) -> None:
    writer = subject.writer
    reason = {"code": "QUOTA_EXCEEDED", "message": "over", "rejections": [["gpu-fit", 2]]}
    await writer.commit([Append("job-a", 0, [_submitted("a")])], {"a": reason, "b": {"code": "X"}})
    assert await _pending(subject) == {"a": reason, "b": {"code": "X"}}
    await writer.commit([], {"a": {"code": "NO_NODE_FITS"}, "b": None})
    assert await _pending(subject) == {"a": {"code": "NO_NODE_FITS"}}


async def test_a_standby_loading_again_drops_the_reasons_the_leader_removed(subject: WriterUnderTest) -> None:
    writer = subject.writer
    standby = Projection()  # what a standby's `follow` loads into, again and again
    await writer.commit([Append("job-a", 0, [_submitted("a")])], {"a": {"code": "X"}, "b": {"code": "Y"}})
    await writer.load_pending(standby)
    assert standby.pending_reasons == {"a": {"code": "X"}, "b": {"code": "Y"}}
    await writer.commit([], {"a": None, "b": {"code": "Z"}})  # a was placed by the leader
    await writer.load_pending(standby)
    assert standby.pending_reasons == {"b": {"code": "Z"}}


@pytest.mark.parametrize("refusal", ["version", "duplicate", "deposed"])
async def test_a_refused_commit_writes_nothing(subject: WriterUnderTest, refusal: str) -> None:
    writer = subject.writer
    first = _started("a")
    await writer.commit([Append("job-a", 0, [_submitted("a"), first])], {"a": {"code": "X"}})
    before = await subject.store.read_all()
    outbox = await subject.store.pending_outbox()
    expected: type[Exception]
    if refusal == "version":
        appends, expected = (
            [Append("job-b", 0, [_submitted("b")]), Append("job-a", 1, [_started("a")])],
            ConcurrencyConflict,
        )
    elif refusal == "duplicate":
        appends, expected = (
            [Append("job-b", 0, [_submitted("b")]), Append("job-a", 2, [_started("a", first.event_id)])],
            DuplicateEventId,
        )
    else:
        subject.fence.leader = False
        appends, expected = [Append("job-b", 0, [_submitted("b")])], NotLeader
    with pytest.raises(expected):
        await writer.commit(appends, {"a": None, "b": {"code": "Y"}})
    assert await subject.store.read_all() == before
    assert await subject.store.pending_outbox() == outbox
    assert await _pending(subject) == {"a": {"code": "X"}}
