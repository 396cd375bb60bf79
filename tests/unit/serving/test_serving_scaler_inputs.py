"""The autoscaler's inputs from load reports: arrivals and token means from two reports' counters, a
restart read from a counter that went back, ready and starting from the service's serving replicas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from suanli.contracts.load import ReplicaLoad
from suanli.serving.domain.scaler_inputs import LoadSampler
from suanli.serving.testing import replica_report

T0 = datetime(2026, 12, 2, tzinfo=UTC)


def _load(replica: str, at_s: float, **numbers: int) -> ReplicaLoad:
    return replica_report("svc-1", replica, T0 + timedelta(seconds=at_s), **numbers)


def test_a_first_report_is_the_baseline_and_the_next_gives_arrivals_and_mean_sizes() -> None:
    sampler = LoadSampler(tick_s=2.0)
    first = sampler.sample(100.0, {"r1": _load("r1", 0, arrived=500, finished=490, context=9_000)}, ["r1"])
    assert (first.arrivals, first.interval_s, first.mean_context, first.mean_generated) == (0, 2.0, 0.0, 0.0)

    reports = {
        "r1": _load("r1", 2, arrived=530, finished=510, context=9_000 + 30 * 400, generated=20 * 150),
        "r2": _load("r2", 2, arrived=7, in_flight=3, queued=2),
    }
    seen = sampler.sample(102.5, reports, ["r1", "r2", "r3"])
    # r2 is new: its counters are its baseline; r1 took 30 requests of 400 context tokens and answered
    # 20 of 150 generated tokens (its generated counter started at 0 here).
    assert (seen.arrivals, seen.interval_s, seen.mean_context) == (30, 2.5, 400.0)
    assert seen.mean_generated == 150.0
    assert (seen.ready, seen.starting, seen.concurrency, seen.queued) == (2, 1, 5.0, 2)


def test_a_counter_that_went_back_is_a_restart_counted_from_zero() -> None:
    sampler = LoadSampler(tick_s=2.0)
    sampler.sample(0.0, {"r1": _load("r1", 0, arrived=1_000, finished=990, context=10**6)}, ["r1"])
    seen = sampler.sample(
        2.0, {"r1": _load("r1", 2, arrived=4, finished=2, context=800, generated=60)}, ["r1"]
    )
    assert (seen.arrivals, seen.mean_context, seen.mean_generated) == (4, 200.0, 30.0)


def test_no_answer_in_a_tick_keeps_the_last_mean_generated_and_a_stale_replica_is_baselined_again() -> None:
    sampler = LoadSampler(tick_s=2.0)
    sampler.sample(0.0, {"r1": _load("r1", 0)}, ["r1"])
    sampler.sample(2.0, {"r1": _load("r1", 2, arrived=2, finished=2, context=100, generated=80)}, ["r1"])
    held = sampler.sample(
        4.0, {"r1": _load("r1", 4, arrived=5, finished=2, context=250, generated=80)}, ["r1"]
    )
    assert (held.arrivals, held.mean_context, held.mean_generated) == (3, 50.0, 40.0)

    # r1's report went stale (left out of the fresh ones): it counts as starting, and is forgotten.
    gone = sampler.sample(6.0, {}, ["r1"])
    assert (gone.ready, gone.starting, gone.arrivals, gone.concurrency) == (0, 1, 0, 0.0)
    back = sampler.sample(8.0, {"r1": _load("r1", 8, arrived=50, finished=40, context=9_000)}, ["r1"])
    assert (back.ready, back.arrivals) == (1, 0)


def test_a_releasing_replicas_requests_are_load_but_it_is_not_ready() -> None:
    sampler = LoadSampler(tick_s=2.0)
    reports = {"r1": _load("r1", 0, in_flight=2), "r9": _load("r9", 0, in_flight=4, queued=1)}
    seen = sampler.sample(0.0, reports, ["r1"])
    assert (seen.ready, seen.starting, seen.concurrency, seen.queued) == (1, 0, 7.0, 1)
