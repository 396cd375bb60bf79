"""fgdb: FGD plus CPU stranding and GPU-model pressure, on hand-built snapshots with hand-computed values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _placement_cluster import node, snapshot
from test_pairing import TYPICAL as PAIRS

from suanli.scheduling.domain.fragmentation import FragmentationModel, TypicalTask
from suanli.scheduling.domain.framework import PluginContext, Profile, Scheduler
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins import default_registry
from suanli.scheduling.domain.plugins.fgdb import ModelPressure, StrandingModel
from suanli.scheduling.domain.plugins.policies import FILTERS, policy_profile
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot

# CPU per GPU milli of this distribution: (0.5 * 4000 + 0.5 * 2000) / (0.5 * 1000 + 0.5 * 500) = 4.
WHOLE = TypicalTask(cpu_milli=4000, gpu_milli=1000, gpu_count=1, gpu_models=(), weight=0.5)
HALF = TypicalTask(cpu_milli=2000, gpu_milli=500, gpu_count=1, gpu_models=(), weight=0.5)
TYPICAL = (WHOLE, HALF)
# Half the typical tasks may only use T4 (by GPU milli: 250 of 750 = one third of the demand).
T4_HALF = TypicalTask(cpu_milli=2000, gpu_milli=500, gpu_count=1, gpu_models=("T4",), weight=0.5)
RESTRICTED = (WHOLE, T4_HALF)

CPU_ONLY = TaskRequest(cpu_milli=4000)
SHARE_500 = TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=500)
SHARE_400 = TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=400)


def fgdb(**args: Any) -> Profile:
    data = {
        "name": "fgdb-test",
        "filters": FILTERS,
        "scores": [{"name": "fgdb", "args": args}],
        "devices": {"name": "fgdb", "args": args},
        "tie_break": "ordered",
    }
    return Profile.from_dict(data, default_registry())


def place(
    profile: Profile, snap: ClusterSnapshot, request: TaskRequest, typical: tuple[TypicalTask, ...], seed: int
) -> Assignment:
    result = Scheduler(profile, np.random.default_rng(seed), PluginContext(typical)).place_task(snap, request)
    assert result.assignment is not None
    return result.assignment


@pytest.mark.parametrize(
    ("gpus", "cpu", "stranded"),
    [
        # 2000 idle, 8000 CPU serves 8000 / 4 = 2000 milli: nothing stranded.
        ([1000, 1000], 8000, 0.0),
        # 4000 CPU serves 1000 of the 2000 idle milli.
        ([1000, 1000], 4000, 1000.0),
        # plenty of CPU: never negative.
        ([1000, 300], 64_000, 0.0),
        # 1300 idle, 2000 CPU serves 500.
        ([1000, 300], 2000, 800.0),
    ],
)
def test_stranding_adds_lam_times_unservable_idle_milli(gpus: list[int], cpu: int, stranded: float) -> None:
    snap = snapshot(node("n", gpus, free_cpu=cpu))
    plain = FragmentationModel(TYPICAL).node_fragmentation(snap)[0]
    assert StrandingModel(TYPICAL, lam=0.25).node_fragmentation(snap)[0] == pytest.approx(
        plain + 0.25 * stranded
    )
    assert StrandingModel(TYPICAL, lam=0.0).node_fragmentation(snap)[0] == pytest.approx(plain)


def test_cpu_ratio_is_per_model_over_the_tasks_allowed_there() -> None:
    model = StrandingModel(RESTRICTED, lam=1.0)
    # code -1 (no GPU) first; A100 only sees WHOLE (4000 / 1000), T4 sees both (4).
    assert model.cpu_per_gpu_milli(("A100", "T4")).tolist() == [np.inf, 4.0, 4.0]
    only_t4 = StrandingModel((T4_HALF,), lam=1.0)
    assert only_t4.cpu_per_gpu_milli(("A100", "T4")).tolist() == [np.inf, np.inf, 4.0]


@pytest.mark.parametrize(
    ("tasks", "nodes", "expected"),
    [
        # No restricted typical task: no pressure anywhere.
        (TYPICAL, [("A100", [1000, 1000]), ("T4", [1000, 1000])], [0.0, 0.0]),
        # One third of the demand needs T4; T4 holds half the free GPU: pressure (1/3) / (1/2).
        (RESTRICTED, [("A100", [1000, 1000]), ("T4", [1000, 1000])], [0.0, 2 / 3]),
        # T4 a quarter of the free GPU: (1/3) / (1/4).
        (RESTRICTED, [("A100", [1000, 1000, 1000]), ("T4", [1000, 0])], [0.0, 4 / 3]),
        # Nothing free on T4: the restricted demand has nowhere to go and presses on nothing.
        (RESTRICTED, [("A100", [1000, 1000]), ("T4", [0, 0])], [0.0, 0.0]),
    ],
)
def test_model_pressure(
    tasks: tuple[TypicalTask, ...], nodes: list[tuple[str, list[int]]], expected: list[float]
) -> None:
    snap = snapshot(*(node(f"n{i}", gpus, model=model) for i, (model, gpus) in enumerate(nodes)))
    assert ModelPressure(tasks).per_model(snap) == pytest.approx(expected)


# CPU-poor node: 8000 CPU for 2000 idle milli (exactly the typical ratio); CPU-rich node: 64 cores. A
# CPU-only task changes FGD's measure on neither (every typical task still fits), so FGD ties and the
# seeded node ranking decides; fgdb sees 1000 milli stranded on the poor node (delta -250) and avoids it.
CPU_POOR_RICH = snapshot(node("poor", [1000, 1000], free_cpu=8000), node("rich", [1000, 1000], cpu=64_000))
# A T4 node with a 500 slice free next to an idle A100 node: FGD packs the unrestricted 500 share into the
# T4 slice (delta +250 against 0 on the A100); with enough model pressure it keeps off the T4.
T4_SLICE = snapshot(node("t4", [500, 1000], model="T4"), node("a100", [1000, 1000], model="A100"))


@pytest.mark.parametrize(
    ("profile", "snap", "request_", "typical", "nodes", "devices"),
    [
        (policy_profile("fgd"), CPU_POOR_RICH, CPU_ONLY, TYPICAL, {0, 1}, ()),
        (policy_profile("fgdb"), CPU_POOR_RICH, CPU_ONLY, TYPICAL, {1}, ()),
        (policy_profile("fgd"), T4_SLICE, SHARE_500, RESTRICTED, {0}, (0,)),
        # Default mu (0.25): the penalty (0.25 * 0.78 * 500 = 97) leaves the T4 slice ahead.
        (policy_profile("fgdb"), T4_SLICE, SHARE_500, RESTRICTED, {0}, (0,)),
        # mu = 1: 250 - 389 < 0, so the A100 (delta 0) wins; its first device (FGD's device rule).
        (fgdb(mu=1.0), T4_SLICE, SHARE_500, RESTRICTED, {1}, (0,)),
        # Device rule is FGD's: the 450 slice (best fit of the 400 share) on a single node.
        (policy_profile("fgdb"), snapshot(node("n", [1000, 900, 450, 300])), SHARE_400, TYPICAL, {0}, (2,)),
    ],
)
def test_fgdb_picks_expected_node_and_device(
    profile: Profile,
    snap: ClusterSnapshot,
    request_: TaskRequest,
    typical: tuple[TypicalTask, ...],
    nodes: set[int],
    devices: tuple[int, ...],
) -> None:
    picks = {place(profile, snap, request_, typical, seed).node for seed in range(12)}
    assert picks == nodes  # every expected node is reached over the seeds, and no other
    assert place(profile, snap, request_, typical, 0).gpu_indices == devices


def test_without_its_terms_fgdb_decides_exactly_like_fgd() -> None:
    rng = np.random.default_rng(3)
    snap = snapshot(
        *(
            node(f"n{i}", [1000] * int(rng.choice([1, 2, 4, 8])), cpu=int(rng.choice([16, 64, 96])) * 1000)
            for i in range(12)
        )
    )
    shapes = [
        TaskRequest(cpu_milli=4000, gpu_count=1, gpu_milli=500),
        TaskRequest(cpu_milli=8000, gpu_count=1, gpu_milli=1000),
        TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=250),
        TaskRequest(cpu_milli=6000),
        TaskRequest(cpu_milli=16000, gpu_count=2, gpu_milli=1000),
    ]
    typical = tuple(
        TypicalTask(s.cpu_milli, s.gpu_milli, s.gpu_count, (), w)
        for s, w in zip(shapes, (0.3, 0.3, 0.2, 0.1, 0.1), strict=True)
    )
    ours = Scheduler(fgdb(lam=0.0, mu=0.0, nu=0.0), np.random.default_rng(9), PluginContext(typical))
    paper = Scheduler(policy_profile("fgd"), np.random.default_rng(9), PluginContext(typical))
    a = b = snap
    for i in range(60):
        request = shapes[int(rng.integers(len(shapes)))]
        ra, rb = ours.place_task(a, request), paper.place_task(b, request)
        assert ra.assignment == rb.assignment, f"decision {i}"
        a, b = ra.snapshot, rb.snapshot


def test_fgdb_needs_typical_tasks() -> None:
    from suanli.scheduling.domain.framework.plugin import ProfileError

    with pytest.raises(ProfileError, match="fgdb"):
        Scheduler(policy_profile("fgdb"), np.random.default_rng(0), PluginContext())


@pytest.mark.parametrize(("nu", "device"), [(0.0, 0), (10.0, 1)])
def test_fgdb_puts_a_230_where_a_220_completes_it(nu: float, device: int) -> None:
    # Device 0 holds a 650 (350 free), device 1 a 550 (450 free). FGD's measure prefers the tighter 350 gap
    # (delta 121 against 77: what is left there, 120, was fragmented for most sizes anyway); the pairing
    # term (regret >= 67.5, x 10) sends the 230 to the 550, which a 220 completes, and keeps the 350 for a
    # 320.
    snap = snapshot(node("n", [350, 450, 1000, 1000]))
    request = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=230)
    result = Scheduler(fgdb(nu=nu), np.random.default_rng(0), PluginContext(PAIRS)).place_task(snap, request)
    assert result.assignment is not None
    assert result.assignment.gpu_indices == (device,)
