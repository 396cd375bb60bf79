"""Many runs (policies x seeds) fanned out over processes, and their summary.

Workers load the traces once each (they are small) and return only binned curves, so the parent never holds
per-arrival data for more than one run at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from suanli.scheduling.simulator.metrics import MAX_ARRIVED_PCT, value_at
from suanli.scheduling.simulator.multiregion import (
    MultiRegionResult,
    MultiRegionSetup,
    describe_setup,
    run_multiregion,
)
from suanli.scheduling.simulator.runner import RunResult, run_arrivals
from suanli.scheduling.simulator.timeline import TimelineResult, run_timeline
from suanli.scheduling.simulator.traces import load_nodes, load_pods


@dataclass(frozen=True)
class Job:
    nodes: Path
    pods: Path
    policy: str
    seed: int
    tune: float
    mode: str = "arrivals"
    setup: MultiRegionSetup | None = None  # the multi-region mode's geography and prices


@cache
def _traces(nodes: Path, pods: Path) -> tuple[list[Any], list[Any]]:
    return load_nodes(nodes), load_pods(pods)


Result = RunResult | TimelineResult | MultiRegionResult


def run_job(job: Job) -> Result:
    nodes, pods = _traces(job.nodes, job.pods)
    if job.mode == "multiregion":
        return run_multiregion(nodes, pods, job.policy, job.seed, job.tune, job.setup or MultiRegionSetup())
    if job.mode == "timeline":
        return run_timeline(nodes, pods, job.policy, job.seed)
    return run_arrivals(nodes, [p.request for p in pods], job.policy, job.seed, job.tune)


def run_jobs(
    jobs: Sequence[Job], workers: int, on_done: Callable[[], None] | None = None
) -> Iterator[Result]:
    """Results in completion order. One worker runs in-process (no pool), which keeps tests cheap."""
    if workers <= 1 or len(jobs) == 1:
        for job in jobs:
            yield run_job(job)
            if on_done:
                on_done()
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        for result in pool.map(run_job, jobs):
            if on_done:
                on_done()
            yield result


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def summarise_arrivals(
    workload: str, results: Sequence[RunResult], policies: Sequence[str]
) -> dict[str, Any]:
    """The `--json` contract: per policy, x=100 unallocated (mean, sd, per seed), x=130 allocation, and the
    median unallocated curve over seeds at every arrived % that all seeds reached."""
    out: dict[str, Any] = {}
    for policy in policies:
        runs = sorted((r for r in results if r.policy == policy), key=lambda r: r.seed)
        if not runs:
            continue
        at100 = [value_at(r.curves.unallocated_pct, 100) for r in runs]
        at130 = [value_at(r.curves.allocation_pct, MAX_ARRIVED_PCT) for r in runs]
        curves = np.vstack([r.curves.unallocated_pct for r in runs])
        have = ~np.isnan(curves).any(axis=0)
        xs = np.flatnonzero(have)
        mean100, sd100 = _mean_sd(at100)
        mean130, sd130 = _mean_sd(at130)
        out[policy] = {
            "unallocated_pct_at_100": {"mean": mean100, "sd": sd100, "per_seed": [float(v) for v in at100]},
            "allocation_pct_at_130": {"mean": mean130, "sd": sd130},
            "curve": {
                "arrived_pct": [int(x) for x in xs],
                "unallocated_pct_median": [float(v) for v in np.median(curves[:, xs], axis=0)],
            },
        }
    return {"workload": workload, "results": out}


def summarise_timeline(
    workload: str, results: Sequence[TimelineResult], policies: Sequence[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in policies:
        runs = sorted((r for r in results if r.policy == policy), key=lambda r: r.seed)
        if not runs:
            continue
        delays = np.concatenate([r.delays for r in runs]) if runs else np.empty(0)
        mean_alloc, sd_alloc = _mean_sd([r.mean_allocation_pct for r in runs])
        out[policy] = {
            "mean_allocation_pct": {"mean": mean_alloc, "sd": sd_alloc},
            "queue_delay_s": {
                "mean": float(delays.mean()) if delays.size else 0.0,
                "p50": float(np.percentile(delays, 50)) if delays.size else 0.0,
                "p95": float(np.percentile(delays, 95)) if delays.size else 0.0,
                "max": float(delays.max()) if delays.size else 0.0,
                "waited_fraction": float((delays > 0).mean()) if delays.size else 0.0,
            },
            "never_placed": [r.never_placed for r in runs],
        }
    return {"workload": workload, "mode": "timeline", "results": out}


def _stat(values: Sequence[float]) -> dict[str, Any]:
    mean, sd = _mean_sd(values)
    return {"mean": mean, "sd": sd, "per_seed": [float(v) for v in values]}


MULTIREGION_METRICS = (
    "placed_pct",
    "pods_placed_pct",
    "unallocated_pct_at_100",
    "rtt_mean_ms",
    "rtt_p99_ms",
    "cost_per_gpu_hour",
    "split_gangs",
    "gangs_placed",
    "rtt_bound_violations",
)


def summarise_multiregion(
    workload: str, results: Sequence[MultiRegionResult], policies: Sequence[str], setup: MultiRegionSetup
) -> dict[str, Any]:
    """The multi-region `--json` contract: per policy, each metric's mean, sd and per-seed values, the
    median unallocated curve, GPU allocated per region (mean over seeds); the setup that produced them."""
    out: dict[str, Any] = {}
    for policy in policies:
        runs = sorted((r for r in results if r.policy == policy), key=lambda r: r.seed)
        if not runs:
            continue
        entry: dict[str, Any] = {name: _stat([r.metrics[name] for r in runs]) for name in MULTIREGION_METRICS}
        entry["seeds"] = [r.seed for r in runs]
        entry["jobs"] = [int(r.metrics["jobs"]) for r in runs]
        entry["gangs"] = [int(r.metrics["gangs"]) for r in runs]
        entry["currency"] = runs[0].currency
        curves = np.vstack([r.unallocated_pct for r in runs])
        xs = np.flatnonzero(~np.isnan(curves).any(axis=0))
        entry["curve"] = {
            "arrived_pct": [int(x) for x in xs],
            "unallocated_pct_median": [float(v) for v in np.median(curves[:, xs], axis=0)],
        }
        entry["region_allocated_pct"] = {
            region: float(np.mean([r.region_allocated_pct[region] for r in runs]))
            for region in runs[0].region_allocated_pct
        }
        entry["seconds_per_run"] = float(np.mean([r.seconds for r in runs]))
        out[policy] = entry
    setup_doc = describe_setup(setup)
    if results:
        setup_doc["nodes_per_region"] = results[0].nodes_per_region
    return {"workload": workload, "mode": "multiregion", "setup": setup_doc, "results": out}
