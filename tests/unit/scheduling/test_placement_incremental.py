"""The per-request cache, the interned node states and the rerooting snapshots decide exactly what a full
evaluation of every node decides, and what the code before them decided.

`data/openb_placements.json` holds the placements of a41c15f (before the cache) for the replays below:
600 `default` and `gpuspec25` arrivals (seed 7, shuffled and inflated as in the simulator) on the openb
node list replicated to 2,000 nodes, under fgd and fgdb; it was written by running `_replay` with that
commit's code on the import path. fgdb had no pairing term then and weighed CPU stranding 0.25: its
replays run with `nu` 0 and `lam` 0.25 (the other tests here run today's fgdb).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.data import data_path
from suanli.scheduling.domain.framework import PluginContext, Scheduler, Statement
from suanli.scheduling.domain.framework.profile import Profile
from suanli.scheduling.domain.model import Node, TaskRequest
from suanli.scheduling.domain.plugins import _fragmentation, default_registry
from suanli.scheduling.domain.plugins.policies import POLICIES, policy_profile
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot, TransitionLog
from suanli.scheduling.simulator.traces import load_nodes, load_pods
from suanli.scheduling.simulator.workload import build_arrivals, workload_distribution

TRACES = data_path("traces/openb")
RECORDED = json.loads((Path(__file__).parent / "data" / "openb_placements.json").read_text())
Placement = list[object] | None


def _nodes(size: int) -> list[Node]:
    base = load_nodes(TRACES / "openb_node_list_gpu_node.csv")
    return [
        replace(base[i % len(base)], id=f"{base[i % len(base)].id}-{i // len(base)}") for i in range(size)
    ]


def _requests(workload: str) -> list[TaskRequest]:
    return [p.request for p in load_pods(TRACES / f"openb_pod_list_{workload}.csv")]


def _recorded_profile(policy: str) -> Profile:
    """The policy as the recording commit had it: fgdb before its pairing term (`nu` 0) and with its CPU
    stranding weight of then (`lam` 0.25)."""
    if policy != "fgdb":
        return policy_profile(policy)
    data = dict(POLICIES[policy])
    without_pairing = {"name": "fgdb", "args": {"lam": 0.25, "nu": 0}}
    data["scores"] = [without_pairing, *data["scores"][1:]]
    data["devices"] = without_pairing
    return Profile.from_dict(data, default_registry())


def _as_list(a: Assignment | None) -> Placement:
    return None if a is None else [a.node, list(a.gpu_indices), list(a.gpu_milli)]


def _columns(snap: ClusterSnapshot) -> tuple[list[object], ...]:
    return tuple(
        getattr(snap, c).tolist() for c in ("cpu_free", "mem_free", "gpu_free", "gpu_full", "gpu_max")
    )


@pytest.mark.parametrize("key", sorted(RECORDED["placements"]))
def test_placements_match_the_code_before_the_cache(key: str) -> None:
    workload, policy = key.split("/")
    requests = _requests(workload)
    snap = ClusterSnapshot.from_nodes(_nodes(RECORDED["nodes"]))
    arrivals = build_arrivals(requests, snap.total_gpu_milli, 1.3, np.random.default_rng(RECORDED["seed"]))
    scheduler = Scheduler(
        _recorded_profile(policy),
        np.random.default_rng(RECORDED["seed"]),
        PluginContext(workload_distribution(requests)),
    )
    got: list[Placement] = []
    for request in arrivals[: RECORDED["decisions"]]:
        result = scheduler.place_task(snap, request)
        snap = result.snapshot
        got.append(_as_list(result.assignment))
    assert got == RECORDED["placements"][key]


@pytest.mark.parametrize(
    ("policy", "workload", "tie_seed"),
    [
        ("fgdb", "default", None),
        ("fgd", "gpushare40", None),
        ("fgdb", "gpuspec25", 3),
        ("bestfit", "default", None),
    ],
)
def test_cached_and_full_evaluation_decide_alike_on_one_snapshot_family(
    policy: str, workload: str, tie_seed: int | None
) -> None:
    """Both schedulers decide on the same snapshots, so the family's working arrays swap between their
    branches at every step; gangs of three are staged and every other one discarded."""
    requests = _requests(workload)
    typical = workload_distribution(requests)
    root = ClusterSnapshot.from_nodes(_nodes(1000))
    arrivals = build_arrivals(requests, root.total_gpu_milli, 1.3, np.random.default_rng(11))[:300]
    cached = Scheduler(
        policy_profile(policy), np.random.default_rng(5), PluginContext(typical), tie_seed=tie_seed
    )
    full = Scheduler(
        policy_profile(policy),
        np.random.default_rng(5),
        PluginContext(typical),
        tie_seed=tie_seed,
        incremental=False,
    )
    snap = root
    for start in range(0, len(arrivals), 3):
        statement = Statement(snap)
        for request in arrivals[start : start + 3]:
            a = cached.place_task(statement.snapshot, request)
            b = full.place_task(statement.snapshot, request)
            assert _as_list(a.assignment) == _as_list(b.assignment)
            assert _columns(a.snapshot) == _columns(b.snapshot)
            if a.assignment is not None:
                statement.stage(request, a.assignment)
        snap = statement.discard() if start % 6 == 3 else statement.commit()
    assert _columns(root) == _columns(ClusterSnapshot.from_nodes(_nodes(1000)))  # the root reads as it was


def test_decisions_hold_when_the_state_table_starts_again_and_requests_are_evicted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_fragmentation, "MIN_STATES", 0)
    monkeypatch.setattr(_fragmentation, "STATES_PER_NODE", 1)
    monkeypatch.setattr(_fragmentation, "DEDUP_MIN_ROWS", 8)  # group identical nodes in small batches too
    monkeypatch.setattr("suanli.scheduling.domain.framework.scheduler.CHOICE_CACHE_SIZE", 4)
    requests = _requests("default")
    typical = workload_distribution(requests)
    snap = ClusterSnapshot.from_nodes(_nodes(100))
    arrivals = build_arrivals(requests, snap.total_gpu_milli, 1.3, np.random.default_rng(3))
    context = PluginContext(typical)
    cached = Scheduler(policy_profile("fgdb"), np.random.default_rng(1), context)
    full = Scheduler(
        policy_profile("fgdb"), np.random.default_rng(1), PluginContext(typical), incremental=False
    )
    placed = 0
    for request in arrivals:
        a, b = cached.place_task(snap, request), full.place_task(snap, request)
        assert _as_list(a.assignment) == _as_list(b.assignment)
        placed += a.placed
        snap = a.snapshot
    assert 0 < placed < len(arrivals)  # the replay runs into a full cluster, where nothing fits
    assert context.node_states().restarts > 3  # the state table started again and again


def test_old_snapshots_read_their_own_columns_after_others_were_derived() -> None:
    root = snapshot(node("a", [1000, 1000]), node("b", [1000]), node("c", [], cpu=8000))
    share = TaskRequest(cpu_milli=1000, memory_mib=10, gpu_count=1, gpu_milli=300)
    one = root.assign(share, Assignment(0, (1,), (300,)))
    two = one.assign(share, Assignment(1, (0,), (300,)))
    other = one.assign(TaskRequest(cpu_milli=8000), Assignment(2))  # a sibling of `two`
    back = two.release(share, Assignment(1, (0,), (300,)))
    assert root.live().gpu_free[0].tolist() == [1000, 1000]
    assert two.gpu_free[:2].tolist() == [[1000, 700], [700, 0]] and two.cpu_free[2] == 8000
    assert other.gpu_free[1].tolist() == [1000, 0] and other.cpu_free.tolist() == [31_000, 32_000, 0]
    assert back.gpu_free.tolist() == one.gpu_free.tolist() and root.cpu_free[0] == 32_000
    assert one.live().cpu_free[0] == 31_000
    a = two.live().gpu_free
    assert a[1, 0] == 700 and not a.flags.writeable
    # Rows that may differ between two snapshots, through their common ancestor `one`.
    assert two.changed_since(other.position).tolist() == [1, 2]
    assert back.changed_since(root.position).tolist() == [0, 1]
    assert root.changed_since(root.position).tolist() == []


def test_the_transition_log_answers_short_paths_it_still_holds() -> None:
    log = TransitionLog(keep=10, walk=3)
    first = log.record(0, np.array([5]))
    second = log.record(first, np.array([6]))
    third = log.record(second, np.array([7]))
    assert log.rows_between(0, third).tolist() == [5, 6, 7]  # type: ignore[union-attr]
    branch = log.record(first, np.array([9, 6]))  # a sibling of `second`
    assert log.rows_between(third, branch).tolist() == [6, 7, 9]  # type: ignore[union-attr]
    fourth = log.record(third, np.array([8]))
    assert log.rows_between(0, fourth) is None  # longer than the walk it answers
    short = TransitionLog(keep=2, walk=10)
    first = short.record(0, np.array([1]))
    second = short.record(first, np.array([2]))
    third = short.record(second, np.array([3]))
    assert short.rows_between(first, third).tolist() == [2, 3]  # type: ignore[union-attr]
    assert short.rows_between(0, third) is None  # `first` was forgotten
