"""Gang topology and CPU pools in the placement framework: the topology score keeps a gang on as few nodes
as hold it, then in one fabric domain, one zone, one region; strict localities `node` and `fabric` with
their pending reason; the CPU-pool score keeps CPU-only tasks off GPU nodes while GPU-less nodes have
room; single tasks decide as before; and `rank` (what explain shows) orders nodes as the decision does."""

from __future__ import annotations

import numpy as np
import pytest

from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.framework import GangContext, PluginContext, Profile, Scheduler
from suanli.scheduling.domain.model import GpuDevice, Job, Locality, Node, Task, TaskRequest
from suanli.scheduling.domain.plugins import default_registry
from suanli.scheduling.domain.plugins.policies import POLICIES, policy_profile
from suanli.scheduling.domain.plugins.topology import CpuPoolScore, TopologyScore, copies
from suanli.scheduling.domain.queueing import (
    ClusterState,
    GangPlacement,
    NodeAvailability,
    NoRegionFits,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import pending, queue
from suanli.scheduling.domain.snapshot import ClusterSnapshot

ONE_GPU = TaskRequest(cpu_milli=4000, memory_mib=8192, gpu_count=1, gpu_milli=1000)
CPU_ONLY = TaskRequest(cpu_milli=4000, memory_mib=8192)


def gpu_node(
    node_id: str,
    free: int,
    total: int = 8,
    zone: str = "z1",
    region: str = "r1",
    fabric: str | None = None,
) -> Node:
    devices = tuple(GpuDevice(i, "A100", free_milli=1000 if i < free else 0) for i in range(total))
    labels = (("fabric", fabric),) if fabric else ()
    return Node(node_id, 128_000, 1_048_576, devices, region, zone, labels)


def cpu_node(node_id: str, cores: int = 64, zone: str = "z1", region: str = "r1") -> Node:
    return Node(node_id, cores * 1000, 262_144, (), region, zone)


def scheduler(policy: str = "fgdb", seed: int = 7) -> Scheduler:
    return Scheduler(policy_profile(policy), np.random.default_rng(seed), PluginContext(DEFAULT_TYPICAL))


def gang_nodes(
    nodes: list[Node], requests: list[TaskRequest], locality: Locality = Locality.ANY
) -> list[str]:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    result = scheduler().place_gang(snapshot, requests, locality)
    assert result.placed, result.diagnosis
    return [snapshot.node_ids[a.node] for a in result.assignments]


# -- the topology score ----------------------------------------------------------------------------------


def test_a_gang_lands_on_one_node_when_one_has_room() -> None:
    # Three nodes with 3 free GPUs each come first in id order; one further node has 8.
    nodes = [gpu_node(f"a{i}", 3) for i in range(3)] + [gpu_node("b", 8)]
    assert set(gang_nodes(nodes, [ONE_GPU] * 4)) == {"b"}


def test_without_one_node_the_gang_takes_as_few_nodes_as_hold_it() -> None:
    nodes = [gpu_node("a1", 1), gpu_node("a2", 1), gpu_node("b1", 3), gpu_node("b2", 2)]
    placed = gang_nodes(nodes, [ONE_GPU] * 5)
    assert sorted(set(placed)) == ["b1", "b2"] and sorted(placed).count("b1") == 3


def test_the_gang_stays_in_one_fabric_domain_before_one_zone() -> None:
    nodes = [
        gpu_node("plain-1", 2),
        gpu_node("plain-2", 2),
        gpu_node("ib-1", 2, fabric="ib"),
        gpu_node("ib-2", 2, fabric="ib"),
        gpu_node("roce-1", 2, fabric="roce"),
    ]
    assert set(gang_nodes(nodes, [ONE_GPU] * 4)) == {"ib-1", "ib-2"}


def test_a_fabric_label_names_a_domain_per_zone() -> None:
    # The same label value in two zones is two domains: neither holds the gang alone.
    nodes = [gpu_node("x-1", 2, zone="z1", fabric="ib"), gpu_node("y-1", 2, zone="z2", fabric="ib")]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    assert snapshot.fabrics == ("r1/z1/ib", "r1/z2/ib") and list(snapshot.fabric_code) == [0, 1]


def test_the_gang_stays_in_one_zone_before_spreading() -> None:
    nodes = [gpu_node("far-1", 2, zone="z2"), gpu_node("near-1", 2), gpu_node("near-2", 2)]
    placed = gang_nodes(nodes, [ONE_GPU] * 4, Locality.ANY)
    assert set(placed) == {"near-1", "near-2"}


def test_tiers_of_the_first_task_and_of_later_tasks() -> None:
    nodes = [gpu_node("whole", 4), gpu_node("ib-1", 2, fabric="ib"), gpu_node("ib-2", 2, fabric="ib")]
    nodes += [gpu_node("zone", 1), gpu_node("other", 1, zone="z2")]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    rows = np.arange(snapshot.size)
    rng = np.random.default_rng(0)
    first = TopologyScore().score_gang(snapshot, ONE_GPU, rows, rng, GangContext((), 4))
    assert first is not None
    # whole node 100; its fabric domain holds 4: 75 + 10 x 2/4; its zone: 50 + 10 x 1/4; its region: 25 + 2.5
    assert list(first) == [100.0, 80.0, 80.0, 52.5, 27.5]
    later = TopologyScore().score_gang(snapshot, ONE_GPU, rows, rng, GangContext((1,), 3))
    assert later is not None and later[1] == 100.0 and later[2] > later[0] > later[4]
    assert TopologyScore().score(snapshot, ONE_GPU, rows, rng) is None
    assert TopologyScore().score_gang(snapshot, ONE_GPU, rows, rng, GangContext((), 1)) is None


def test_copies_counts_shapes_on_cpu_memory_and_devices() -> None:
    snapshot = ClusterSnapshot.from_nodes([gpu_node("n", 8), cpu_node("c", cores=10)])
    rows = np.arange(2)
    assert list(copies(snapshot, ONE_GPU, rows, 99)) == [8, 0]
    assert list(copies(snapshot, CPU_ONLY, rows, 99)) == [32, 2]
    half = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=500)
    assert list(copies(snapshot, half, rows, 99)) == [16, 0]


# -- strict localities -----------------------------------------------------------------------------------


def test_locality_node_keeps_the_gang_on_one_node_or_waits() -> None:
    nodes = [gpu_node("a", 3), gpu_node("b", 3)]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    result = scheduler().place_gang(snapshot, [ONE_GPU] * 3, Locality.NODE)
    assert result.placed and len({a.node for a in result.assignments}) == 1
    refused = scheduler().place_gang(snapshot, [ONE_GPU] * 4, Locality.NODE)
    assert not refused.placed and refused.snapshot is snapshot
    spread = scheduler().place_gang(snapshot, [ONE_GPU] * 4, Locality.ANY)
    assert spread.placed


def test_locality_fabric_needs_one_fabric_domain() -> None:
    nodes = [gpu_node("ib-1", 2, fabric="ib"), gpu_node("ib-2", 2, fabric="ib"), gpu_node("plain", 8)]
    placed = gang_nodes(nodes, [ONE_GPU] * 4, Locality.FABRIC)
    assert set(placed) == {"ib-1", "ib-2"}
    unlabelled = ClusterSnapshot.from_nodes([gpu_node("p1", 8), gpu_node("p2", 8)])
    result = scheduler().place_gang(unlabelled, [ONE_GPU] * 2, Locality.FABRIC)
    assert not result.placed
    assert [(o.region, o.verdict) for o in result.regions] == [
        ("r1", "only 0 of 2 tasks fit in any one fabric domain")
    ]


@pytest.mark.parametrize(("locality", "words"), [("node", "single node"), ("fabric", "single fabric domain")])
def test_an_unmet_strict_locality_is_the_pending_reason(locality: str, words: str) -> None:
    # The cycle counts capacity from the nodes' totals: two nodes of 2 GPUs, in two zones.
    nodes = (gpu_node("a", 2, total=2, fabric="ib"), gpu_node("b", 2, total=2, zone="z2", fabric="ib"))
    job = Job("g", "q", tuple(Task(f"t{i}", ONE_GPU) for i in range(3)), locality=Locality(locality))
    placer = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL)
    reason = schedule_cycle(ClusterState(nodes, (queue("q"),), pending=(pending(job, 1),)), placer).reason(
        "g"
    )
    assert isinstance(reason, NoRegionFits) and reason.locality == locality
    assert reason.message.startswith(f"no {words} can hold the gang of 3 tasks")


# -- CPU pools --------------------------------------------------------------------------------------------


def test_cpu_only_tasks_keep_off_gpu_nodes_while_gpu_less_nodes_have_room() -> None:
    nodes = [gpu_node(f"g{i}", 8) for i in range(3)] + [cpu_node("c1", cores=8), cpu_node("c2", cores=8)]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    s = scheduler()
    where = []
    for _ in range(6):
        result = s.place_task(snapshot, CPU_ONLY)
        assert result.assignment is not None
        where.append(snapshot.node_ids[result.assignment.node])
        snapshot = result.snapshot
    # Four fit on the two 8-core nodes; only then does a GPU node give up CPU.
    assert sorted(where[:4]) == ["c1", "c1", "c2", "c2"] and all(w.startswith("g") for w in where[4:])


def test_cpu_pool_scores_alike_for_gpu_tasks_and_single_kind_fleets() -> None:
    mixed = ClusterSnapshot.from_nodes([gpu_node("g", 8), cpu_node("c")])
    rows = np.arange(2)
    rng = np.random.default_rng(0)
    scores = CpuPoolScore().score(mixed, CPU_ONLY, rows, rng)
    assert scores is not None and list(scores) == [0.0, 100.0]
    assert CpuPoolScore().score(mixed, ONE_GPU, rows, rng) is None
    only_gpu = ClusterSnapshot.from_nodes([gpu_node("g1", 8), gpu_node("g2", 8)])
    assert CpuPoolScore().score(only_gpu, CPU_ONLY, rows, rng) is None


def test_a_cpu_only_gang_fills_the_cpu_pool_before_gpu_nodes() -> None:
    nodes = [gpu_node("g", 8), cpu_node("c1", cores=8), cpu_node("c2", cores=8)]
    assert sorted(gang_nodes(nodes, [CPU_ONLY] * 4)) == ["c1", "c1", "c2", "c2"]


# -- single tasks decide as before ----------------------------------------------------------------------


def test_single_tasks_on_a_gpu_only_fleet_decide_as_fgdb_without_the_new_scores() -> None:
    bare = dict(POLICIES["fgdb"])
    bare["scores"] = [s for s in bare["scores"] if not isinstance(s, dict)]
    profiles = [policy_profile("fgdb"), Profile.from_dict(bare, default_registry())]
    rng = np.random.default_rng(3)
    nodes = [gpu_node(f"n{i:02}", int(rng.integers(0, 9))) for i in range(30)]
    shapes = [ONE_GPU, CPU_ONLY, TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=300)]
    decisions = []
    for profile in profiles:
        s = Scheduler(profile, np.random.default_rng(11), PluginContext(DEFAULT_TYPICAL))
        snapshot = ClusterSnapshot.from_nodes(nodes)
        chosen = []
        for i in range(40):
            result = s.place_task(snapshot, shapes[i % 3])
            if result.assignment is not None:
                chosen.append(result.assignment)
                snapshot = result.snapshot
        decisions.append(chosen)
    assert decisions[0] == decisions[1] and len(decisions[0]) > 20


# -- rank: the decision's ordering ----------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["fgdb", "fgd", "bestfit", "spread", "random"])
def test_rank_puts_the_decided_node_first(policy: str) -> None:
    rng = np.random.default_rng(5)
    nodes = [gpu_node(f"n{i:02}", int(rng.integers(1, 9)), zone=f"z{i % 3}") for i in range(20)]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    for request, gang in ((ONE_GPU, None), (ONE_GPU, GangContext((), 4)), (CPU_ONLY, None)):
        decided = scheduler(policy, seed=9).place_task(snapshot, request, gang=gang)
        ranking = scheduler(policy, seed=9).rank(snapshot, request, gang=gang)
        assert decided.assignment is not None and int(ranking.rows[0]) == decided.assignment.node
        assert ranking.rows.size == 20 and sorted(ranking.rows.tolist()) == list(range(20))
        names = [name for name, _ in ranking.parts]
        assert names == [ref.name for ref in policy_profile(policy).scores]


def test_explain_lists_first_the_node_the_gang_is_placed_on() -> None:
    nodes = [gpu_node(f"a{i}", 3) for i in range(3)] + [gpu_node("b", 8)]
    nodes += [gpu_node(f"t{i}", 8, region="r2") for i in range(2)]
    room = tuple(
        NodeAvailability(n, n.cpu_milli, n.memory_mib, tuple(d.free_milli for d in n.gpus)) for n in nodes
    )
    for locality in (None, Locality.ZONE, Locality.NODE):
        job = Job("g", "q", tuple(Task(f"t{i}", ONE_GPU) for i in range(4)), locality=locality)
        placed = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, seed=4, cycle=1).place_gang(
            room, job
        )
        assert isinstance(placed, GangPlacement)
        # Explained in a later cycle, as the service does: ties still break as the decision's did.
        scores, _ = FrameworkPlacer(policy_profile("fgdb"), DEFAULT_TYPICAL, seed=4, cycle=9).explain(
            room, job
        )
        assert scores[0].node_id == placed.placements[0].node_id
        assert dict(scores[0].plugin_scores)["topology"] == 2000.0
