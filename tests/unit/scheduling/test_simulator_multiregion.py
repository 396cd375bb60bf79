"""The multi-region simulation's parts: node spread, job grouping, data-region draw, metrics, policies."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from suanli.resources.network import measured_network
from suanli.scheduling.domain.fragmentation import typical_tasks
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import GpuDevice, Locality, Node, TaskRequest
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot
from suanli.scheduling.simulator.geography import (
    HUBS,
    deal,
    draw_regions,
    even_weights,
    hub_weights,
    parse_weights,
    spread_nodes,
)
from suanli.scheduling.simulator.jobs import RTT_BOUNDS_MS, TraceJob, group_jobs, with_network
from suanli.scheduling.simulator.multiregion import (
    NEAREST_FIRST,
    NETWORK_AWARE,
    REGION_BLIND,
    JobOutcome,
    network_snapshot,
    outcome_metrics,
    region_policy,
)
from suanli.scheduling.simulator.traces import TracePod
from suanli.scheduling.simulator.workload import build_arrivals

NET = measured_network()
REGIONS = NET.regions
WHOLE = TaskRequest(cpu_milli=4000, memory_mib=1024, gpu_count=1, gpu_milli=1000)


def _nodes(models: dict[str, int], gpus: int = 4) -> list[Node]:
    out = []
    for model, count in models.items():
        out += [
            Node(f"{model}-{i}", 64_000, 262_144, tuple(GpuDevice(k, model) for k in range(gpus)))
            for i in range(count)
        ]
    return out


# -- node spread -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", [even_weights(REGIONS), hub_weights(REGIONS)], ids=["even", "hubs"])
def test_each_region_gets_its_weighted_share_of_nodes_and_of_every_model(weights: dict[str, float]) -> None:
    nodes = _nodes({"T4": 404, "G2": 549, "P100": 134, "G3": 39})
    spread = spread_nodes(nodes, NET, weights, np.random.default_rng(7))
    assert sorted(n.id for n in spread) == sorted(n.id for n in nodes)  # every node once
    total = sum(weights.values())
    per_region = Counter(n.region for n in spread)
    for region in REGIONS:
        assert abs(per_region[region] - len(nodes) * weights[region] / total) <= 1
    for model in ("T4", "G2", "P100", "G3"):
        count = sum(n.gpu_model == model for n in nodes)
        got = Counter(n.region for n in spread if n.gpu_model == model)
        for region in REGIONS:
            assert abs(got[region] - count * weights[region] / total) <= 1.5, (model, region)


def test_zones_are_the_tables_zones_dealt_round_robin_inside_each_region() -> None:
    spread = spread_nodes(_nodes({"T4": 95}), NET, even_weights(REGIONS), np.random.default_rng(1))
    for region in REGIONS:
        zones = Counter(n.zone for n in spread if n.region == region)
        assert set(zones) <= set(NET.zones_of(region)) and len(NET.zones_of(region)) == 3
        assert max(zones.values()) - min(zones.values()) <= 1


def test_the_spread_is_seeded() -> None:
    nodes = _nodes({"T4": 40, "G2": 40})

    def where(seed: int) -> list[tuple[str, str]]:
        return [
            (n.id, n.region)
            for n in spread_nodes(nodes, NET, even_weights(REGIONS), np.random.default_rng(seed))
        ]

    assert where(3) == where(3)
    assert sorted(where(3)) != sorted(where(4))


def test_smooth_round_robin_interleaves_by_weight() -> None:
    assert deal(4, {"b": 1.0, "a": 1.0}) == ["a", "b", "a", "b"]  # ties go to the name
    assert Counter(deal(9, {"a": 2.0, "b": 1.0, "c": 0.0})) == {"a": 6, "b": 3}
    with pytest.raises(ValueError, match="positive weight"):
        deal(1, {"a": 0.0})


def test_weights_from_the_command_line() -> None:
    weights = parse_weights("dallas=3, tokyo=0", REGIONS, even_weights(REGIONS))
    assert weights["dallas"] == 3.0 and weights["tokyo"] == 0.0 and weights["london"] == 1.0
    for bad, message in [
        ("mars=1", "unknown region"),
        ("dallas=-1", ">= 0"),
        ("dallas", ">= 0"),
        ("dallas=x", ">= 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_weights(bad, REGIONS, even_weights(REGIONS))
    with pytest.raises(ValueError, match="every region weight is 0"):
        parse_weights(",".join(f"{r}=0" for r in REGIONS), REGIONS, even_weights(REGIONS))


# -- jobs and the data-region draw ------------------------------------------------------------------------


def test_pods_created_together_with_one_shape_are_one_gang() -> None:
    other = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=500)
    pods = [
        TracePod("a", WHOLE, 10),
        TracePod("b", WHOLE, 10),
        TracePod("c", other, 10),  # same second, other shape: its own job
        TracePod("d", WHOLE, 11),
        TracePod("e", WHOLE, None),  # no creation time: alone
        TracePod("f", WHOLE, None),
        TracePod("g", WHOLE, 10),
    ]
    jobs = group_jobs(pods)
    assert [(j.name, len(j.tasks)) for j in jobs] == [("a", 3), ("c", 1), ("d", 1), ("e", 1), ("f", 1)]
    assert jobs[0].is_gang and jobs[0].total_gpu_milli == 3000 and jobs[0].gpu_milli == 1000


def test_jobs_arrive_like_pods_inflated_to_the_capacity() -> None:
    jobs = [TraceJob("g", (WHOLE,) * 3), TraceJob("s", (WHOLE,))]
    arrivals = build_arrivals(jobs, capacity_gpu_milli=10_000, tune=1.3, rng=np.random.default_rng(2))
    assert sum(j.total_gpu_milli for j in arrivals) >= 12_000 - 3000
    assert set(arrivals) == set(jobs)


def test_data_regions_follow_the_weights() -> None:
    weights = hub_weights(REGIONS)
    drawn = Counter(draw_regions(70_000, weights, np.random.default_rng(5)))
    total = sum(weights.values())
    for region in REGIONS:
        assert drawn[region] / 70_000 == pytest.approx(weights[region] / total, abs=0.01)
    assert sum(drawn[h] for h in HUBS) / 70_000 == pytest.approx(4 / 7, abs=0.01)
    assert draw_regions(50, weights, np.random.default_rng(5)) == draw_regions(
        50, weights, np.random.default_rng(5)
    )


def test_every_task_of_a_job_carries_its_data_region_and_a_share_of_jobs_a_bound() -> None:
    jobs = [TraceJob(f"j{i}", (WHOLE,) * (1 + i % 3)) for i in range(4000)]
    work = with_network(jobs, even_weights(REGIONS), np.random.default_rng(9), bound_share=0.25)
    bounded = [w for w in work if w.max_rtt_ms is not None]
    assert len(bounded) / len(work) == pytest.approx(0.25, abs=0.03)
    assert {w.max_rtt_ms for w in bounded} == set(RTT_BOUNDS_MS)
    for w in work:
        assert {(t.data_region, t.max_rtt_ms) for t in w.tasks} == {(w.data_region, w.max_rtt_ms)}
        assert all(t.data_region == "" and t.max_rtt_ms is None for t in w.blind)
    with pytest.raises(ValueError, match="bound_share"):
        with_network(jobs, even_weights(REGIONS), np.random.default_rng(9), bound_share=1.5)


# -- metrics ----------------------------------------------------------------------------------------------


def test_metrics_count_split_gangs_bound_violations_and_the_rtt_p99() -> None:
    placed = [JobOutcome(1, ("dallas",), float(rtt), gpus=1.0, cost_per_hour=2.0) for rtt in range(100)]
    outcomes = [
        *placed,
        JobOutcome(3, ("dallas", "tokyo"), 142.0, max_rtt_ms=150.0, gpus=3.0, cost_per_hour=6.0),  # split
        JobOutcome(2, ("london",), 75.0, max_rtt_ms=40.0, gpus=2.0, cost_per_hour=5.0),  # over its bound
        JobOutcome(4, max_rtt_ms=40.0),  # a gang not placed
    ]
    m = outcome_metrics(outcomes)
    rtts = [*range(100), 142.0, 75.0]
    assert m["jobs"] == 103 and m["placed_pct"] == pytest.approx(100 * 102 / 103)
    assert m["pods_placed_pct"] == pytest.approx(100 * 105 / 109)
    assert m["rtt_mean_ms"] == pytest.approx(np.mean(rtts))
    # 102 RTTs sorted: the 99th percentile lies 0.99 of the way from the 100th (98) to the 101st (99).
    assert m["rtt_p99_ms"] == pytest.approx(98.99)
    assert m["gangs"] == 3 and m["gangs_placed"] == 2 and m["split_gangs"] == 1
    assert m["rtt_bound_violations"] == 1
    assert m["cost_per_gpu_hour"] == pytest.approx((200 + 6 + 5) / 105)


def test_metrics_of_nothing_placed_are_zero() -> None:
    m = outcome_metrics([JobOutcome(2)])
    assert m["placed_pct"] == 0 and m["rtt_p99_ms"] == 0 and m["cost_per_gpu_hour"] == 0


# -- policies through the Scheduler ---------------------------------------------------------------------


def _cluster(regions: dict[str, int]) -> ClusterSnapshot:
    nodes = [
        Node(
            f"{r}-{i}", 64_000, 262_144, tuple(GpuDevice(k, "T4") for k in range(4)), region=r, zone=f"{r}-1"
        )
        for r, count in regions.items()
        for i in range(count)
    ]
    return ClusterSnapshot.from_nodes(nodes)


def test_nearest_first_tries_the_data_region_then_regions_by_rtt() -> None:
    policy = region_policy(NEAREST_FIRST)
    weights = policy.profile.region_choice
    assert policy.aware and weights.capacity == 0 and weights.price == 0 and weights.network == 1
    # dallas, the data region, is full; toronto (34 ms) is nearer than london (113 ms) but has less room.
    snap = _cluster({"dallas": 1, "toronto": 1, "london": 3})
    full = TaskRequest(cpu_milli=1000, gpu_count=4, gpu_milli=1000)
    snap = snap.assign(full, Assignment(0, (0, 1, 2, 3), (1000,) * 4))
    assert snap.regions[int(snap.region_code[0])] == "dallas"
    ctx = PluginContext(typical_tasks=typical_tasks([WHOLE], 1.0), network=network_snapshot(NET))
    request = replace(WHOLE, data_region="dallas")
    near = Scheduler(policy.profile, np.random.default_rng(0), ctx).place_gang(
        snap, [request], Locality.REGION
    )
    assert near.placed
    assert [snap.regions[int(snap.region_code[a.node])] for a in near.assignments] == ["toronto"]
    verdicts = {o.region: o.verdict for o in near.regions}
    assert verdicts["toronto"] == "chosen" and verdicts["dallas"].startswith("free room short")
    aware = Scheduler(region_policy(NETWORK_AWARE).profile, np.random.default_rng(0), ctx)
    chosen = aware.place_gang(snap, [request], Locality.REGION)
    # The network-aware profile weighs london's room (3 empty nodes) against toronto's shorter RTT.
    assert chosen.placed and [o.region for o in chosen.regions if o.verdict == "chosen"] == ["london"]


def test_the_policies_are_fgdb_and_only_region_blind_ignores_the_network() -> None:
    assert not region_policy(REGION_BLIND).aware
    assert region_policy(NETWORK_AWARE).profile.name == "fgdb"
    with pytest.raises(KeyError, match="unknown multi-region policy"):
        region_policy("fgd")


def test_the_network_is_the_measured_median_matrix() -> None:
    network = network_snapshot(NET)
    assert network.regions == REGIONS and network.links == 90
    assert network.path("dallas", "sao-paulo")[0] == NET.region_rtt("dallas", "sao-paulo") == 144.0
    assert network.path("tokyo", "tokyo")[0] == 0.0
