"""Pruning metering's task records: finished ones go after the retention; nothing pruned is charged again."""

from __future__ import annotations

from metering_harness import DAY_MS, Harness, everyone, metric_points, run_task, usage_ids
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.metering.adapters.metrics import TaskTableCounters
from suanli.metering.domain import (
    AttemptState,
    Ended,
    MeteredTask,
    Sampled,
    Seen,
    Started,
    late,
    prunable,
)
from suanli.metering.testing import (
    ms,
)
from suanli.telemetry.names import METERING_LATE_FACTS, PRUNED_ROWS

T0 = ms("2025-01-01T10:00:00")
HOUR_MS = 3_600_000


def finished(ended_ms: int, *, last_fact_ms: int | None = None) -> MeteredTask:
    attempt = AttemptState(1, started_ms=ended_ms - 60_000, ended_ms=ended_ms, metered_through_ms=ended_ms)
    return MeteredTask("t", "j", "acme", "q", (attempt,), last_fact_ms=last_fact_ms)


def test_a_finished_record_is_prunable_only_once_its_end_and_last_fact_are_past_the_horizon() -> None:
    assert prunable(finished(T0), T0 + 1)
    assert not prunable(finished(T0), T0)
    assert not prunable(finished(T0, last_fact_ms=T0 + 10), T0 + 5)  # a late fact came in since


def test_a_running_or_unmetered_attempt_keeps_the_record_however_old() -> None:
    running = MeteredTask("t", "j", "acme", "q", (AttemptState(1, started_ms=T0),), last_fact_ms=T0)
    assert not prunable(running, T0 + 100 * DAY_MS)
    unmetered = AttemptState(1, started_ms=T0, ended_ms=T0 + 1000, metered_through_ms=T0)
    assert not prunable(MeteredTask("t", "j", None, None, (unmetered,)), T0 + 100 * DAY_MS)


def test_a_never_started_record_goes_after_a_retention_without_facts_and_an_undated_one_stays() -> None:
    waiting = MeteredTask("t", "j", "acme", "q", last_fact_ms=T0)
    assert prunable(waiting, T0 + 1) and not prunable(waiting, T0)
    assert not prunable(MeteredTask("t", "j", "acme", "q"), T0 + 100 * DAY_MS)


def test_late_facts_are_those_from_before_the_horizon_about_attempts_not_held_as_started() -> None:
    horizon = T0
    old_start, new_start = Started("t", "j", 1, "n", T0 - 1), Started("t", "j", 1, "n", T0)
    assert late(None, old_start, horizon) and not late(None, new_start, horizon)
    held = MeteredTask("t", attempts=(AttemptState(1, started_ms=T0 - 5),))
    assert not late(held, Ended("t", 1, T0 - 1, "finished"), horizon)  # a long run's late end counts
    assert not late(held, Sampled("t", 1, T0 - 1, 1000, 50.0, 1, 0), horizon)
    assert late(held, Started("t", "j", 2, "n", T0 - 1), horizon)  # another attempt, not held
    assert late(None, Seen("t", "n", T0 - 1), horizon) and not late(held, Seen("t", "n", T0 - 1), horizon)


async def test_a_pruned_finished_task_redelivered_in_full_is_not_charged_again() -> None:
    h = Harness(T0)
    start, end = T0 + 30_000, T0 + 135_000
    await run_task(h, "t1", start, end)
    charged = usage_ids(h, "t1")
    assert len(charged) == 3
    h.clock.now_ms = end + DAY_MS - 1
    assert await h.run(lambda b: h.metering.prune_tasks(b, everyone, 100)) == 0  # within the retention
    h.clock.now_ms = end + DAY_MS + HOUR_MS
    assert await h.run(lambda b: h.metering.prune_tasks(b, everyone, 100)) == 1
    assert b"t1" not in h.tasks and h.counters.pruned_rows == 1

    await run_task(h, "t1", start, end)  # every input of the task delivered again, a day later
    assert usage_ids(h, "t1") == charged  # no window produced a second time
    assert h.counters.late == ["Started", "Ended"]
    # What the redelivery left (who pays, the unstarted placement) goes a retention later.
    h.clock.now_ms += DAY_MS + 1
    assert await h.run(lambda b: h.metering.prune_tasks(b, everyone, 100)) == 1
    assert b"t1" not in h.tasks


async def test_a_new_attempt_after_the_prune_is_charged_to_the_payer_its_placement_names() -> None:
    h = Harness(T0)
    await run_task(h, "t1", T0 + 30_000, T0 + 90_000)
    h.clock.now_ms = T0 + DAY_MS + HOUR_MS
    assert await h.run(lambda b: h.metering.prune_tasks(b, everyone, 100)) == 1
    retry = h.clock.now_ms - 120_000
    await run_task(h, "t1", retry, retry + 60_000, attempt=2)
    second = [r for _, r in h.usage.events() if r["attempt"] == 2]
    assert sum(w["gpu_milli_seconds"] for w in second) == 500 * 60
    assert {(w["tenant"], w["queue"]) for w in second} == {("acme", "research")}
    assert h.counters.late == []


async def test_pruning_is_bounded_per_batch_and_keeps_running_and_unowned_tasks() -> None:
    h = Harness(T0)
    for i in range(5):
        await run_task(h, f"done-{i}", T0 + 1000 * i, T0 + 1000 * i + 30_000)
    running = Started("running", "job-1", 1, "n1", T0)
    await h.run(lambda b: h.metering.apply_fact(running, b))
    h.clock.now_ms = T0 + 2 * DAY_MS
    rounds = [await h.run(lambda b: h.metering.prune_tasks(b, lambda k: k != "done-4", 2)) for _ in range(4)]
    assert rounds == [2, 2, 0, 0]
    assert set(h.tasks) == {b"running", b"done-4"}


def test_the_counters_serve_every_series_at_zero_then_count() -> None:
    reader = InMemoryMetricReader()
    counters = TaskTableCounters(MeterProvider(metric_readers=[reader]).get_meter("test"))
    counters.pruned(3)
    counters.late_fact("Started")
    points = metric_points(reader)
    assert points[(PRUNED_ROWS, (("table", "metering_tasks"),))] == 3
    assert {k[1][0][1]: v for k, v in points.items() if k[0] == METERING_LATE_FACTS} == {
        "Started": 1,
        "Ended": 0,
        "Sampled": 0,
        "Seen": 0,
    }
