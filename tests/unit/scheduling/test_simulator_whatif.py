"""The what-if replay (`simulator/whatif.py`) on deploy/fleets/small.yaml with the example job specs:
durations, waits behind capacity and behind quota, never-placed jobs with their reason, preemption, and
seeded arrivals. Everything is deterministic: arrivals come from the wrapper or the seed only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from suanli.cli.whatif import Inputs, load_inputs
from suanli.data import data_path
from suanli.scheduling.simulator.whatif import (
    DEFAULT_QUEUE,
    WhatIfResult,
    arrival_times,
    run_whatif,
    summarise_whatif,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "jobs"
SMALL = data_path("deploy/fleets/small.yaml")
QUEUES = data_path("deploy/scheduler/queues.yaml")
HOUR = 3600.0


def example(name: str) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(document, dict)
    return document


def write(tmp_path: Path, entries: list[Any], name: str = "jobs.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(entries, sort_keys=False))
    return path


def inputs(jobs: Path, queues: Path | None = None, rate: float | None = None) -> Inputs:
    return load_inputs(SMALL, jobs, queues, rate, "fgdb")


def waits(run: WhatIfResult, name: str) -> list[float]:
    """The waits of the placed jobs called ``name``, shortest first."""
    return sorted(o.wait_s for o in run.jobs if o.name == name and o.wait_s is not None)


def test_the_examples_run_for_their_durations_on_the_small_fleet() -> None:
    data = inputs(EXAMPLES)
    assert len(data.setup.nodes) == 20 and data.setup.capacity_gpu_milli == 74_000
    assert {j.spec.queue for j in data.jobs} == {DEFAULT_QUEUE}  # no --queues: one queue, no quota
    run = run_whatif(data.setup, data.jobs, "fgdb", 42)
    assert [o.started_s for o in run.jobs] == [0.0, 0.0, 0.0]
    assert run.timeline.never_placed == 0 and run.timeline.delays.tolist() == [0.0, 0.0, 0.0]
    # resnet50-ddp: 4 whole A100s for 2h; llm-chat: 3 x 0.3 GPU for 30m; nightly-etl is CPU only.
    assert run.timeline.times.tolist() == [0.0, 90.0, 300.0, 1800.0, 7200.0]
    assert run.timeline.allocation_pct[0] == pytest.approx(4.9 / 74 * 100)
    assert run.timeline.allocation_pct[3] == pytest.approx(4 / 74 * 100)
    assert run.timeline.allocation_pct[-1] == 0.0
    mean = (4.9 * 1800 + 4 * 5400) / 7200 / 74 * 100
    assert run.timeline.mean_allocation_pct == pytest.approx(mean)
    assert run.unallocated_pct == pytest.approx(100 - mean)
    assert run.unallocated_pct_while_waiting is None


def test_jobs_wait_for_capacity_then_for_quota(tmp_path: Path) -> None:
    ddp = example("training-gang.yaml")
    jobs = write(tmp_path, [{"at": 0, "duration": "1h", "copies": 8, "job": ddp}])
    # ddp's own duration (2h) wins over the wrapper's, which only fills tasks without one.
    # The fleet has 24 A100s: six 4-GPU gangs at once, the last two after the first six end.
    open_queue = inputs(jobs)
    run = run_whatif(open_queue.setup, open_queue.jobs, "fgdb", 42)
    assert waits(run, "resnet50-ddp") == [0.0] * 6 + [2 * HOUR] * 2
    # acme/vision may hold 8 A100s and borrow 4 more from its cohort: three gangs at a time.
    quota = inputs(jobs, QUEUES)
    run = run_whatif(quota.setup, quota.jobs, "fgdb", 42)
    assert waits(run, "resnet50-ddp") == [0.0] * 3 + [2 * HOUR] * 3 + [4 * HOUR] * 2
    summary = summarise_whatif("jobs", "small", [run], ["fgdb"])["results"]["fgdb"]
    assert (summary["placed"], summary["waited"], summary["never_placed"]) == (8, 5, 0)
    assert summary["wait_s"]["mean"] == pytest.approx((3 * 2 * HOUR + 2 * 4 * HOUR) / 8)
    assert summary["wait_s"]["p95"] == pytest.approx(4 * HOUR)
    assert summary["runs"][0]["unallocated_pct_while_waiting"] == pytest.approx(100 - 12 / 74 * 100)


def test_a_job_over_its_quota_is_never_placed_and_says_why(tmp_path: Path) -> None:
    # initech's CPU maximum is 512 cores; the fleet has 1,928, so only the quota stands in the way.
    big = {
        "name": "wide-etl",
        "queue": "initech",
        "locality": "any",  # no one region has five 110-core nodes; the fleet has six
        "tasks": [
            {"name": "w", "replicas": 5, "resources": {"cpu": "110", "memory": "8Gi"}, "duration": "1m"}
        ],
    }
    data = inputs(write(tmp_path, [big, example("cpu-batch.yaml")]), QUEUES)
    run = run_whatif(data.setup, data.jobs, "fgdb", 42)
    never = [o for o in run.jobs if o.started_s is None]
    assert [o.name for o in never] == ["wide-etl"] and run.timeline.never_placed == 1
    assert never[0].reason is not None and never[0].reason["code"] == "QUOTA_EXCEEDED"
    summary = summarise_whatif("jobs", "small", [run], ["fgdb"])
    listed = summary["results"]["fgdb"]["runs"][0]["never_placed_jobs"]
    assert [(j["name"], j["reason"]["code"]) for j in listed] == [("wide-etl", "QUOTA_EXCEEDED")]
    assert summary["results"]["fgdb"]["placed"] == 1


def test_a_higher_priority_job_preempts_and_the_victim_restarts(tmp_path: Path) -> None:
    def a100_gang(name: str, pc: str, gpus: int, at: float) -> dict[str, Any]:
        spec = {
            "name": name,
            "queue": "acme/nlp",
            "priority_class": pc,
            "tasks": [
                {
                    "name": "w",
                    "replicas": gpus // 8,
                    "resources": {"cpu": "8", "memory": "64Gi", "gpu": 8, "gpu_models": ["A100 80GB SXM"]},
                    "duration": "1h",
                }
            ],
        }
        return {"at": at, "job": spec}

    # acme/nlp may hold 16 A100s (8 guaranteed, 8 borrowed from acme/vision, acme's own cap 16): the
    # low-priority job holds them all, and a higher class arriving later takes the room.
    jobs = write(tmp_path, [a100_gang("low", "research", 16, 0), a100_gang("high", "production", 8, 600)])
    data = inputs(jobs, QUEUES)
    run = run_whatif(data.setup, data.jobs, "fgdb", 42)
    low, high = run.jobs
    assert high.started_s == 600.0 and high.preempted == 0
    assert low.preempted == 1 and low.started_s == 0.0
    # The victim restarts whole once the preemptor has finished, and runs its full hour again.
    assert run.timeline.times[-1] == 600.0 + HOUR + HOUR


def test_poisson_arrivals_depend_on_the_seed_only(tmp_path: Path) -> None:
    jobs = write(tmp_path, [{"copies": 20, "job": example("inference-fractional.yaml")}])
    data = inputs(jobs, rate=0.5)
    a = arrival_times(data.jobs, 0.5, 7)
    assert a == arrival_times(data.jobs, 0.5, 7) and a != arrival_times(data.jobs, 0.5, 8)
    assert a == sorted(a) and a[0] > 0 and 20 < a[-1] < 80  # 20 arrivals at 0.5/s: about 40 s
    fgdb, bestfit = (run_whatif(data.setup, data.jobs, p, 7) for p in ("fgdb", "bestfit"))
    assert [o.arrival_s for o in fgdb.jobs] == [o.arrival_s for o in bestfit.jobs] == a
    # A job with its own `at` keeps it; without a rate the others arrive at 0.
    assert arrival_times(data.jobs, None, 7) == [0.0] * 20


def test_a_replay_is_deterministic(tmp_path: Path) -> None:
    jobs = write(
        tmp_path,
        [
            {"copies": 30, "job": example("inference-fractional.yaml")},
            {"at": 5, "copies": 4, "job": example("training-gang.yaml")},
            example("cpu-batch.yaml"),
        ],
    )
    data = inputs(jobs, rate=0.05)
    first, again = (run_whatif(data.setup, data.jobs, "fgd", 3) for _ in range(2))
    assert first.timeline.allocation_pct.tolist() == again.timeline.allocation_pct.tolist()
    assert [o.started_s for o in first.jobs] == [o.started_s for o in again.jobs]
