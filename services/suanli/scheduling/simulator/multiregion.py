"""Multi-region mode: the openb nodes spread over the 10 measured regions, a job stream with data regions
and RTT bounds, and three placement policies run through the real `Scheduler`.

Policies (every one is fgdb inside a region; they differ in what they know and how they pick the region):

- `region-blind`: fgdb as it was before network awareness. Jobs reach it without data region, bound or
  locality (`place_gang(..., Locality.ANY)`): pods go wherever fgdb scores best, and a gang may be split
  over regions.
- `nearest-first`: the data region first, then the other regions by RTT to it. It is fgdb with region
  choice weighted on the network only (`capacity: 0, network: 1, price: 0`, an RTT scale above the
  table's largest RTT, so the order is exactly by RTT, ties by name); it keeps the job's bound and
  locality like the network-aware profile, so the two differ only in the order regions are tried.
- `network-aware`: fgdb as shipped: region choice by capacity, network and price with the default
  weights, the network filter and score.

The network is the measured tables' median RTTs (`suanli.resources.network`), every link up; prices are
the price book's standard rates in effect at `PRICES_AT` (`--pricebook` for another book).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from suanli.resources.network import MeasuredNetwork, measured_network
from suanli.scheduling.adapters.pricebook import load_prices
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.framework.profile import Profile
from suanli.scheduling.domain.model import Locality, Node
from suanli.scheduling.domain.network import NetworkSnapshot, RegionLink
from suanli.scheduling.domain.plugins import default_registry
from suanli.scheduling.domain.plugins.policies import POLICIES, policy_profile
from suanli.scheduling.domain.pricing import PriceTable
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot
from suanli.scheduling.simulator.geography import even_weights, hub_weights, spread_nodes
from suanli.scheduling.simulator.jobs import BOUND_SHARE, RTT_BOUNDS_MS, NetworkJob, group_jobs, with_network
from suanli.scheduling.simulator.metrics import arrived_bins, binned, value_at
from suanli.scheduling.simulator.traces import TracePod
from suanli.scheduling.simulator.workload import build_arrivals, workload_distribution

REGION_BLIND, NEAREST_FIRST, NETWORK_AWARE = "region-blind", "nearest-first", "network-aware"
REGION_POLICIES = {
    REGION_BLIND: "fgdb without data region, RTT bound or locality (gangs may split)",
    NEAREST_FIRST: "fgdb in the data region, then the other regions by RTT (bound and locality kept)",
    NETWORK_AWARE: "fgdb with region choice by capacity, network and price, network filter and score",
}
# The openb mode's streams (workload 0, scheduler 1) plus the network fields and the node spread.
WORKLOAD_STREAM, SCHEDULER_STREAM, NETWORK_STREAM, SPREAD_STREAM = 0, 1, 2, 3
PRICES_AT = datetime(2026, 1, 1, tzinfo=UTC)
NEAREST_WEIGHTS = {"capacity": 0.0, "network": 1.0, "price": 0.0, "rtt_scale_ms": 10_000.0}


@dataclass(frozen=True, slots=True)
class MultiRegionSetup:
    """The run's geography and prices; weights not given take the module defaults (`geography`)."""

    region_weights: tuple[tuple[str, float], ...] = ()
    data_weights: tuple[tuple[str, float], ...] = ()
    bound_share: float = BOUND_SHARE
    pricebook: Path | None = None

    def capacity_weights(self, regions: Sequence[str]) -> dict[str, float]:
        return dict(self.region_weights) or even_weights(regions)

    def demand_weights(self, regions: Sequence[str]) -> dict[str, float]:
        return dict(self.data_weights) or hub_weights(regions)


@dataclass(frozen=True, slots=True)
class RegionPolicy:
    name: str
    profile: Profile
    aware: bool  # jobs carry their data region, RTT bound and locality `region`


def region_policy(name: str) -> RegionPolicy:
    if name == REGION_BLIND:
        return RegionPolicy(name, policy_profile("fgdb"), aware=False)
    if name == NETWORK_AWARE:
        return RegionPolicy(name, policy_profile("fgdb"), aware=True)
    if name == NEAREST_FIRST:
        data = {
            **POLICIES["fgdb"],
            "name": NEAREST_FIRST,
            "description": REGION_POLICIES[NEAREST_FIRST],
            "region_choice": NEAREST_WEIGHTS,
        }
        return RegionPolicy(name, Profile.from_dict(data, default_registry()), aware=True)
    raise KeyError(f"unknown multi-region policy {name!r}; known: {', '.join(REGION_POLICIES)}")


def network_snapshot(measured: MeasuredNetwork) -> NetworkSnapshot:
    """Every measured region pair as an up link with its median RTT."""
    return NetworkSnapshot(RegionLink(s, d, rtt) for (s, d), rtt in sorted(measured.region_rtt_ms.items()))


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What became of one job: where its tasks went (empty: not placed) and what that costs."""

    tasks: int
    regions: tuple[str, ...] = ()  # the distinct regions of its tasks
    rtt_ms: float = 0.0  # the worst RTT from a task's region to the data region
    max_rtt_ms: float | None = None
    gpus: float = 0.0  # GPUs held (milli / 1000)
    cost_per_hour: float = 0.0  # expected price of its GPU tasks per hour

    @property
    def placed(self) -> bool:
        return bool(self.regions)

    @property
    def split(self) -> bool:
        return len(self.regions) > 1

    @property
    def violates_bound(self) -> bool:
        return self.placed and self.max_rtt_ms is not None and self.rtt_ms > self.max_rtt_ms


def outcome_metrics(outcomes: Sequence[JobOutcome]) -> dict[str, float]:
    """Per run: placed % of jobs and of pods, mean and p99 RTT to the data region over placed jobs,
    gangs (jobs of several pods) placed and split across regions, bound violations, cost per GPU-hour."""
    placed = [o for o in outcomes if o.placed]
    rtts = np.array([o.rtt_ms for o in placed], dtype=np.float64)
    gpus = sum(o.gpus for o in placed)
    pods = sum(o.tasks for o in outcomes)
    return {
        "jobs": float(len(outcomes)),
        "placed_pct": 100.0 * len(placed) / len(outcomes) if outcomes else 0.0,
        "pods_placed_pct": 100.0 * sum(o.tasks for o in placed) / pods if pods else 0.0,
        "rtt_mean_ms": float(rtts.mean()) if rtts.size else 0.0,
        "rtt_p99_ms": float(np.percentile(rtts, 99)) if rtts.size else 0.0,
        "gangs": float(sum(o.tasks > 1 for o in outcomes)),
        "gangs_placed": float(sum(o.tasks > 1 for o in placed)),
        "split_gangs": float(sum(o.split for o in placed)),
        "rtt_bound_violations": float(sum(o.violates_bound for o in placed)),
        "cost_per_gpu_hour": sum(o.cost_per_hour for o in placed) / gpus if gpus else 0.0,
    }


@dataclass(frozen=True)
class MultiRegionResult:
    policy: str
    seed: int
    metrics: dict[str, float]  # outcome_metrics, plus unallocated_pct_at_100
    rtt_ms: np.ndarray  # per placed job, for the distribution plot
    unallocated_pct: np.ndarray  # binned over arrived % like the openb mode
    region_allocated_pct: dict[str, float]  # GPU allocated per region after the last arrival
    currency: str = ""
    seconds: float = 0.0
    nodes_per_region: dict[str, int] = field(default_factory=dict)


def _outcome(
    snapshot: ClusterSnapshot,
    job: NetworkJob,
    assignments: Sequence[Assignment],
    rtt_to: Mapping[str, np.ndarray],
    prices: PriceTable,
) -> JobOutcome:
    codes = [int(snapshot.region_code[a.node]) for a in assignments]
    regions = tuple(sorted({snapshot.regions[c] for c in codes}))
    rtt = max(float(rtt_to[job.data_region][c]) for c in codes)
    gpus = cost = 0.0
    for request, a, code in zip(job.tasks, assignments, codes, strict=False):
        if not a.gpu_milli:
            continue
        model = snapshot.models[int(snapshot.model_code[a.node])]
        price = prices.expected_per_hour(
            snapshot.regions[code], request.cpu_milli, [(model, m) for m in a.gpu_milli]
        )
        gpus += sum(a.gpu_milli) / 1000
        cost += price or 0.0
    return JobOutcome(len(job.tasks), regions, rtt, job.max_rtt_ms, gpus, cost)


@cache
def _prices(pricebook: Path | None) -> PriceTable:
    return load_prices(PRICES_AT, pricebook)


def _region_gpu(snapshot: ClusterSnapshot, capacity: bool) -> dict[str, float]:
    per_node = snapshot.gpu_count * 1000 if capacity else snapshot.gpu_free.sum(axis=1)
    return {r: float(per_node[snapshot.region_code == k].sum()) for k, r in enumerate(snapshot.regions)}


def run_multiregion(
    nodes: Sequence[Node],
    pods: Sequence[TracePod],
    policy: str,
    seed: int,
    tune: float,
    setup: MultiRegionSetup,
) -> MultiRegionResult:
    started = time.perf_counter()
    measured = measured_network()
    regions = measured.regions
    spread_rng = np.random.default_rng([seed, SPREAD_STREAM])
    snapshot = ClusterSnapshot.from_nodes(
        spread_nodes(nodes, measured, setup.capacity_weights(regions), spread_rng)
    )
    capacity = snapshot.total_gpu_milli
    typical = workload_distribution([p.request for p in pods])
    arrivals = build_arrivals(
        group_jobs(pods), capacity, tune, np.random.default_rng([seed, WORKLOAD_STREAM])
    )
    work = with_network(
        arrivals,
        setup.demand_weights(regions),
        np.random.default_rng([seed, NETWORK_STREAM]),
        setup.bound_share,
    )
    network = network_snapshot(measured)
    prices = _prices(setup.pricebook)
    chosen = region_policy(policy)
    context = PluginContext(typical, network=network, prices=prices)
    scheduler = Scheduler(chosen.profile, np.random.default_rng([seed, SCHEDULER_STREAM]), context)
    rtt_to = {r: network.paths_to(r, snapshot.regions).rtt_ms for r in regions}
    region_capacity = _region_gpu(snapshot, capacity=True)

    outcomes: list[JobOutcome] = []
    arrived = np.empty(len(work))
    allocated = np.empty(len(work))
    arrived_milli = allocated_milli = 0
    for i, job in enumerate(work):
        if chosen.aware:
            result = scheduler.place_gang(snapshot, job.tasks, Locality.REGION)
        else:
            result = scheduler.place_gang(snapshot, job.blind, Locality.ANY)
        arrived_milli += job.job.total_gpu_milli
        if result.placed:
            snapshot = result.snapshot
            allocated_milli += job.job.total_gpu_milli
            outcomes.append(_outcome(snapshot, job, result.assignments, rtt_to, prices))
        else:
            outcomes.append(JobOutcome(len(job.tasks), max_rtt_ms=job.max_rtt_ms))
        arrived[i] = arrived_milli
        allocated[i] = allocated_milli

    unallocated = 100 - binned(allocated / capacity * 100, arrived_bins(arrived, capacity))
    metrics = outcome_metrics(outcomes)
    metrics["unallocated_pct_at_100"] = value_at(unallocated, 100)
    free = _region_gpu(snapshot, capacity=False)
    placed_rtts = np.array([o.rtt_ms for o in outcomes if o.placed], dtype=np.float64)
    return MultiRegionResult(
        policy=policy,
        seed=seed,
        metrics=metrics,
        rtt_ms=placed_rtts,
        unallocated_pct=unallocated,
        region_allocated_pct={
            r: 100.0 * (1 - free[r] / total) if total else 0.0 for r, total in region_capacity.items()
        },
        currency=prices.currency,
        seconds=time.perf_counter() - started,
        nodes_per_region={r: int((snapshot.region_code == k).sum()) for k, r in enumerate(snapshot.regions)},
    )


def describe_setup(setup: MultiRegionSetup) -> dict[str, Any]:
    """The run's parameters as the JSON summary records them."""
    regions = measured_network().regions
    return {
        "regions": list(regions),
        "capacity_weights": setup.capacity_weights(regions),
        "data_weights": setup.demand_weights(regions),
        "rtt_bound_share": setup.bound_share,
        "rtt_bounds_ms": list(RTT_BOUNDS_MS),
        "prices_at": PRICES_AT.isoformat(),
        "pricebook": str(setup.pricebook) if setup.pricebook else "deploy/billing/pricebook.yaml",
    }
