"""The cycle runner: what it records, the pending reasons it keeps, and the metrics it owns."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from _scheduler import harness

from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask, Phase
from suanli.scheduling.service_layer.commands import CancelJob, RecordTaskReport, SubmitJob
from suanli.scheduling.service_layer.projection import Projection


@dataclass
class RecordingMetrics:
    """The Metrics port, keeping what it was told."""

    cycles: list[tuple[int, int, dict[tuple[str, str], int], dict[str, int]]] = field(default_factory=list)
    placements: list[tuple[str, float]] = field(default_factory=list)
    decisions: list[tuple[str, int]] = field(default_factory=list)

    def cycle(
        self,
        seconds: float,
        placed: int,
        preempted: int,
        pending: Mapping[tuple[str, str], int],
        depth: Mapping[str, int],
    ) -> None:
        assert seconds >= 0
        self.cycles.append((placed, preempted, dict(pending), dict(depth)))

    def placed(self, region: str, latency_s: float) -> None:
        self.placements.append((region, latency_s))

    def decision(self, outcome: str, count: int = 1) -> None:
        self.decisions.append((outcome, count))


def _spec(gpus: int = 1) -> AcceptedSpec:
    tasks = tuple(AcceptedTask("", f"t{i}", cpu_milli=1000, gpu_count=1, gpu_milli=1000) for i in range(gpus))
    return AcceptedSpec("j", "acme", tasks, min_available=gpus)


async def test_a_cycle_reports_placements_their_latency_and_what_still_waits() -> None:
    metrics = RecordingMetrics()
    h = harness(metrics=metrics)
    await h.configure()
    fits = await h.scheduler.commands.handle(SubmitJob(_spec(2)))
    too_big = await h.scheduler.commands.handle(SubmitJob(_spec(8)))  # the quota is four A100s
    h.clock.advance(timedelta(seconds=3))
    assert await h.scheduler.cycles.run() == 1
    assert h.scheduler.cycles.count == 1
    assert metrics.placements == [("r", 3.0), ("r", 3.0)]  # per task, from submit to placement
    ((placed, preempted, pending, depth),) = metrics.cycles
    assert (placed, preempted, depth) == (1, 0, {"acme": 1})
    assert sum(pending.values()) == 1 and {queue for queue, _ in pending} == {"acme"}
    assert all(t.node_id for t in h.projection.jobs[fits.id].tasks)
    assert h.projection.pending_reasons[too_big.id]["code"] == next(code for _, code in pending)
    stored = Projection()
    await h.writer.load_pending(stored)  # written in the cycle's transaction
    assert stored.pending_reasons == {too_big.id: h.projection.pending_reasons[too_big.id]}


async def test_idle_cycles_zero_the_gauges_once() -> None:
    metrics = RecordingMetrics()
    h = harness(metrics=metrics)
    await h.configure()
    for _ in range(3):
        assert await h.scheduler.cycles.run() == 0
    assert h.scheduler.cycles.count == 3
    # Reported on the first idle cycle only; every configured queue's depth is there, at 0.
    assert metrics.cycles == [(0, 0, {}, {"acme": 0})]
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await h.scheduler.cycles.run()
    await h.scheduler.commands.handle(CancelJob(job.id, "done"))
    assert h.projection.jobs[job.id].phase is Phase.CANCELLED
    await h.scheduler.cycles.run()
    assert metrics.cycles[-2][0] == 1  # the busy cycle placed one job
    assert metrics.cycles[-1] == (0, 0, {}, {"acme": 0})  # idle again: zeroed again, once
    assert ("cancelled", 1) in metrics.decisions


async def test_without_queues_nothing_runs_and_nothing_is_counted() -> None:
    metrics = RecordingMetrics()
    h = harness(metrics=metrics)
    assert await h.scheduler.cycles.run() == 0
    assert h.scheduler.cycles.count == 0 and metrics.cycles == []
    assert h.scheduler.cycles.since_last() == float("inf")


async def test_an_admitted_job_loses_its_pending_reason_in_the_store_too() -> None:
    h = harness()
    await h.configure()
    first = await h.scheduler.commands.handle(SubmitJob(_spec(4)))
    second = await h.scheduler.commands.handle(SubmitJob(_spec(4)))  # over the quota while the first runs
    await h.scheduler.cycles.run()
    assert second.id in h.projection.pending_reasons and first.id not in h.projection.pending_reasons
    for task in h.projection.jobs[first.id].tasks:
        record = {
            "event_id": str(uuid.uuid4()),
            "occurred_at": h.clock.now(),
            "producer": "agent",
            "subject_id": task.task_id,
            "task_id": task.task_id,
            "job_id": first.id,
            "node_id": task.node_id,
            "attempt": task.attempt,
            "exit_code": 0,
        }
        assert await h.scheduler.commands.handle(RecordTaskReport("TaskFinished", record, record["event_id"]))
    assert h.projection.jobs[first.id].phase is Phase.SUCCEEDED
    assert await h.scheduler.cycles.run() == 1
    assert second.id not in h.projection.pending_reasons
    stored = Projection()
    await h.writer.load_pending(stored)
    assert stored.pending_reasons == {}
