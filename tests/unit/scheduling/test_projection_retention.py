"""Bounded state: finished jobs past the retention leave the projection and every lookup built on it,
active ones never do; a job's view folded from its own stream is the projection's; and a projection
restored from a snapshot and caught up equals one folded from position 0, wherever the snapshot was cut."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from _scheduler import T0, Harness, harness

from suanli.contracts import new_envelope
from suanli.eventstore import InMemorySnapshots, StoredEvent
from suanli.infra.dataclass_json import StateDecodeError
from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask, JobView, Phase
from suanli.scheduling.service_layer.commands import CancelJob, RecordTaskReport, SubmitJob
from suanli.scheduling.service_layer.projection import Projection, Retention, fold_job, job_stream
from suanli.scheduling.service_layer.projection_snapshot import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_NAME,
    Snapshotter,
    decode_state,
    encode_state,
    load_projection,
)


def _spec(n: int) -> AcceptedSpec:
    task = AcceptedTask("", "t0", cpu_milli=1000, gpu_count=1, gpu_milli=1000, argv=("run",))
    return AcceptedSpec(name=f"j{n}", queue="acme", min_available=1, tasks=(task,), request_id=f"r{n}")


def _report(name: str, job: JobView, **extra: Any) -> RecordTaskReport:
    task = job.tasks[0]
    fields = {"task_id": task.task_id, "job_id": job.id, "node_id": task.node_id, "attempt": task.attempt}
    record = {**new_envelope("agent", task.task_id, event_id=uuid.uuid4(), occurred_at=T0), **fields, **extra}
    return RecordTaskReport(name, record, record["event_id"])


async def _history() -> tuple[Harness, list[str], list[StoredEvent]]:
    """Jobs 0-2 run and succeed, 3 is cancelled while pending, 4 and 5 are placed; then, two hours on,
    job 6 is submitted."""
    h = harness(nodes=("n1", "n2"))
    await h.configure()
    ids = []
    for n in range(3):
        job = await h.scheduler.commands.handle(SubmitJob(_spec(n)))
        ids.append(job.id)
        await h.scheduler.cycles.run()
        placed = h.projection.jobs[job.id]
        await h.scheduler.commands.handle(_report("TaskStarted", placed, device_indices=[], pid=None))
        await h.scheduler.commands.handle(_report("TaskFinished", placed, exit_code=0))
        h.clock.advance(timedelta(minutes=1))
    cancelled = await h.scheduler.commands.handle(SubmitJob(_spec(3)))
    ids.append(cancelled.id)
    await h.scheduler.commands.handle(CancelJob(cancelled.id, "not needed", "alice"))
    for n in (4, 5):
        job = await h.scheduler.commands.handle(SubmitJob(_spec(n)))
        ids.append(job.id)
    await h.scheduler.cycles.run()
    h.clock.advance(timedelta(hours=2))
    ids.append((await h.scheduler.commands.handle(SubmitJob(_spec(6)))).id)
    return h, ids, await h.store.read_all()


def _folded(events: list[StoredEvent], retention: Retention) -> Projection:
    projection = Projection(retention)
    projection.apply_all(events)
    return projection


def _observed(p: Projection) -> dict[str, Any]:
    """Everything a decision or a read takes from a projection, lookups and list pages included."""
    return {
        "position": p.position,
        "next_seq": p.next_seq,
        "versions": p.versions,
        "jobs": list(p.jobs.items()),
        "live": list(p.live),
        "task_owner": p.task_owner,
        "traces": p.traces,
        "by_request": p.by_request,
        "queues": p.queues,
        "classes": p.priority_classes,
        "admin": p.admin_requests,
        "pending": p.pending_by_tenant,
        "finished": list(p.finished.items()),
        "horizon": p.horizon,
        "evicted": p.evicted,
        "pages": [j.seq for j in p.index.page(1000).jobs],
        "tenant_pages": [j.seq for j in p.index.page(1000, tenant="acme", newest_first=True).jobs],
    }


async def test_finished_jobs_past_the_retention_leave_every_lookup_and_active_ones_stay() -> None:
    _, ids, events = await _history()
    kept_all = _folded(events, Retention())
    assert [kept_all.jobs[i].phase for i in ids[:4]] == [Phase.SUCCEEDED] * 3 + [Phase.CANCELLED]
    assert all(kept_all.jobs[i].active for i in ids[4:6]) and not kept_all.jobs[ids[6]].phase.final

    p = _folded(events, Retention(finished_s=3600))
    assert set(p.jobs) == set(ids[4:]) and p.evicted == 4 and not p.finished
    assert [j.id for j in p.index.page(100).jobs] == ids[4:]
    assert {k for k, _ in p.by_request} == {"acme"} and set(p.by_request.values()) == set(ids[4:])
    assert set(p.task_owner.values()) == set(ids[4:])
    assert not any(p.versions.get(job_stream(i)) for i in ids[:4])
    assert p.versions[job_stream(ids[4])] == kept_all.versions[job_stream(ids[4])]
    assert set(p.live) == set(ids[4:]) and p.pending_jobs("acme") == 3


async def test_the_count_cap_keeps_the_latest_finished_jobs() -> None:
    _, ids, events = await _history()
    p = _folded(events, Retention(max_finished=2))
    assert list(p.finished) == ids[2:4]  # job 2 finished, then 3 was cancelled
    assert set(p.jobs) == set(ids[2:]) and p.evicted == 2


async def test_a_job_folded_from_its_own_stream_is_the_projections_view() -> None:
    h, ids, events = await _history()
    kept_all = _folded(events, Retention())
    for job_id in ids:
        assert fold_job(await h.store.read(job_stream(job_id))) == kept_all.jobs[job_id]
    assert fold_job([]) is None


@pytest.mark.parametrize("retention", [Retention(), Retention(finished_s=3600), Retention(max_finished=1)])
async def test_a_snapshot_and_its_tail_equal_a_fold_from_position_zero(retention: Retention) -> None:
    _, _, events = await _history()
    whole = _observed(_folded(events, retention))
    for cut in range(0, len(events) + 1, 3):
        state = decode_state(encode_state(_folded(events[:cut], retention).state()))
        restored = Projection.restored(state, retention)
        restored.apply_all(events[cut:])
        assert _observed(restored) == whole, f"snapshot cut after {cut} events"


async def test_the_snapshotter_writes_only_when_the_projection_moved_and_loading_resumes_from_it() -> None:
    _, ids, events = await _history()
    snapshots = InMemorySnapshots()
    retention = Retention(finished_s=3600)
    projection = _folded(events, retention)
    taker = Snapshotter(projection, snapshots, keep=2)
    assert await taker.take() == events[-1].position
    assert await taker.take() is None
    loaded = await load_projection(snapshots, retention)
    assert loaded.position == events[-1].position and set(loaded.jobs) == set(ids[4:])
    assert _observed(loaded) == _observed(projection)


async def test_a_snapshot_of_another_format_or_unreadable_is_ignored() -> None:
    from suanli.eventstore import Snapshot

    snapshots = InMemorySnapshots()
    await snapshots.save(Snapshot(SNAPSHOT_NAME, 10, "projection-json-older", b"{}"), keep=3)
    assert (await load_projection(snapshots)).position == 0
    await snapshots.save(Snapshot(SNAPSHOT_NAME, 11, SNAPSHOT_FORMAT, b'{"position": "x"}'), keep=3)
    assert (await load_projection(snapshots)).position == 0
    with pytest.raises(StateDecodeError):
        decode_state(b'{"position": "x"}')
