"""Each policy on a hand-built snapshot where the expected node (and device) is known."""

from __future__ import annotations

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.scheduling.domain.fragmentation import TypicalTask
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot

TYPICAL = (
    TypicalTask(cpu_milli=2000, gpu_milli=500, gpu_count=1, gpu_models=(), weight=0.5),
    TypicalTask(cpu_milli=2000, gpu_milli=1000, gpu_count=1, gpu_models=(), weight=0.5),
)
SHARE_400 = TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=400)
WHOLE_1 = TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=1000)


def place(policy: str, snap: ClusterSnapshot, request: TaskRequest, seed: int = 0) -> Assignment:
    scheduler = Scheduler(policy_profile(policy), np.random.default_rng(seed), PluginContext(TYPICAL))
    result = scheduler.place_task(snap, request)
    assert result.assignment is not None
    return result.assignment


# Node 0 idle (4 GPUs); node 1 has a 500-milli slice free next to a used GPU; node 2 only a 600 slice.
PARTLY = snapshot(
    node("idle", [1000, 1000, 1000, 1000]),
    node("half", [500, 0, 1000, 1000]),
    node("sixty", [600, 0, 0, 0]),
)


@pytest.mark.parametrize(
    ("policy", "request_", "nodes", "devices"),
    [
        # FGD by hand (F = expected fragmented milli, typical tasks 500-share and 1-GPU at 0.5 each):
        # idle 0 -> 300 (the 600 left is a fragment for the 1-GPU task): delta -300;
        # half 250 -> 100 on the 500 slice (delta +150) or -> 550 on a whole GPU (delta -300);
        # sixty 300 -> 200: delta +100. Best: half, on its 500 slice.
        ("fgd", SHARE_400, {1}, (0,)),
        ("fgdx", SHARE_400, {1}, (0,)),
        # BestFit: least leftover CPU+GPU after placement -> the nearly full node.
        ("bestfit", SHARE_400, {2}, (0,)),
        # Packing: partly used devices first, the one with least free milli (500 < 600) scores highest.
        ("packing", SHARE_400, {1}, (0,)),
        # DotProd: floor(100 * (1 - dot / 2)) is 98 on idle and 99 on both partly used nodes: a tie.
        ("dotprod", SHARE_400, {1, 2}, (0,)),
        # Spread: most free after placement -> the idle node.
        ("spread", SHARE_400, {0}, (0,)),
        # A whole GPU leaves FGD's measure unchanged on idle and half (delta 0, sixty cannot host it): FGD
        # ties, fgdx breaks the tie towards the fuller node, on its lowest-index free GPU.
        ("fgd", WHOLE_1, {0, 1}, None),
        ("fgdx", WHOLE_1, {1}, (2,)),
        ("packing", WHOLE_1, {1}, (2,)),
    ],
)
def test_policy_picks_expected_node_and_device(
    policy: str, request_: TaskRequest, nodes: set[int], devices: tuple[int, ...] | None
) -> None:
    where = place(policy, PARTLY, request_)
    assert where.node in nodes
    if devices is not None:
        assert where.gpu_indices == devices


def test_clustering_prefers_node_running_the_same_class() -> None:
    snap = snapshot(node("empty", [1000, 1000]), node("shared", [1000, 1000]), node("whole", [1000, 1000]))
    snap = snap.assign(SHARE_400, Assignment(1, (0,), (400,)))
    snap = snap.assign(WHOLE_1, Assignment(2, (0,), (1000,)))
    assert place("clustering", snap, SHARE_400).node == 1
    assert place("clustering", snap, WHOLE_1).node == 2
    # A CPU-only task scores 0 everywhere: any node is acceptable, it just has to be placed.
    assert place("clustering", snap, TaskRequest(cpu_milli=1000)).node in (0, 1, 2)


def test_random_policy_uses_the_injected_generator() -> None:
    snap = snapshot(*(node(f"n{i}", [1000]) for i in range(8)))
    picks = [place("random", snap, WHOLE_1, seed).node for seed in range(20)]
    assert len(set(picks)) > 3
    assert picks == [place("random", snap, WHOLE_1, seed).node for seed in range(20)]


@pytest.mark.parametrize(
    ("devices", "expected"),
    [("lowest-index", 0), ("best-fit", 2), ("fgd", 2)],
)
def test_device_choice_for_shared_task(devices: str, expected: int) -> None:
    from suanli.scheduling.domain.framework import Profile
    from suanli.scheduling.domain.plugins import default_registry

    snap = snapshot(node("n", [1000, 900, 450, 300]))
    profile = Profile.from_dict(
        {"filters": ["gpu-fit"], "scores": [], "devices": devices}, default_registry()
    )
    where = Scheduler(profile, np.random.default_rng(0), PluginContext(TYPICAL)).place_task(snap, SHARE_400)
    assert where.assignment is not None and where.assignment.gpu_indices == (expected,)
