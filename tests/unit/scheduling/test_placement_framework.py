"""Profiles, validation errors, gangs (stage / commit / discard) and determinism of the scheduler."""

from __future__ import annotations

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.scheduling.domain.framework import PluginContext, Profile, ProfileError, Scheduler, Statement
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins import default_registry
from suanli.scheduling.domain.plugins.policies import POLICIES, policy_profile
from suanli.scheduling.domain.snapshot import Assignment

REG = default_registry()
WHOLE = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=1000)


def test_yaml_profile_loads_with_weights_and_args() -> None:
    profile = Profile.from_yaml(
        """
        name: mine
        filters: [cpu, gpu-fit]
        scores:
          - {name: bestfit, weight: 2}
          - {name: dotprod, args: {cpu_scale: 64000}}
        devices: best-fit
        tie_break: ordered
        """,
        REG,
    )
    assert [(s.name, s.weight) for s in profile.scores] == [("bestfit", 2.0), ("dotprod", 1.0)]
    assert profile.scores[1].args == {"cpu_scale": 64000}
    assert profile.devices.name == "best-fit" and profile.tie_break == "ordered"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"filters": ["cpu", "gpu-fitt"]}, "unknown filter plugin 'gpu-fitt'"),
        ({"filters": ["cpu"], "scores": ["fgd"], "devices": "worst"}, "unknown devices plugin 'worst'"),
        ({"filters": ["cpu"], "scores": [{"name": "fgd", "args": {"exactly": True}}]}, "unknown argument"),
        ({"filters": ["cpu"], "scores": [{"name": "fgd", "args": {"exact": "yes"}}]}, "must be bool"),
        ({"filters": ["cpu"], "scores": [{"name": "dotprod", "args": {"cpu_scale": -1}}]}, "out of range"),
        ({"filters": ["cpu"], "scores": [{"name": "bestfit", "weight": 0}]}, "positive number"),
        ({"filters": ["cpu"], "tie_break": "first"}, "tie_break must be one of"),
        ({"filters": []}, "at least one filter"),
        ({"filters": ["cpu"], "sores": []}, "unknown profile key"),
    ],
)
def test_bad_profiles_are_refused_with_a_clear_error(data: dict, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        Profile.from_dict(data, REG)


def test_fragmentation_plugins_need_a_workload_distribution() -> None:
    with pytest.raises(ProfileError, match="needs a workload distribution"):
        Scheduler(policy_profile("fgd"), np.random.default_rng(0), PluginContext())


def test_every_named_policy_loads() -> None:
    assert {"random", "dotprod", "clustering", "packing", "bestfit", "fgd", "spread", "fgdx"} <= set(POLICIES)
    for name in POLICIES:
        assert policy_profile(name).name == name


def _bestfit() -> Scheduler:
    return Scheduler(policy_profile("bestfit"), np.random.default_rng(0), PluginContext())


def test_gang_is_all_or_nothing() -> None:
    snap = snapshot(node("a", [1000, 1000]), node("b", [1000]))
    fits = _bestfit().place_gang(snap, [WHOLE, WHOLE, WHOLE])
    assert fits.placed and len(fits.assignments) == 3
    assert int(fits.snapshot.gpu_full.sum()) == 0

    too_big = _bestfit().place_gang(snap, [WHOLE] * 4)
    assert not too_big.placed and too_big.failed_task == 3 and too_big.assignments == ()
    assert too_big.snapshot is snap  # nothing of the partial gang leaks out


def test_statement_stage_commit_discard() -> None:
    snap = snapshot(node("a", [1000, 1000]))
    st = Statement(snap)
    st.stage(WHOLE, Assignment(0, (0,), (1000,)))
    st.stage(WHOLE, Assignment(0, (1,), (1000,)))
    assert st.snapshot.gpu_full[0] == 0 and snap.gpu_full[0] == 2
    assert st.commit().gpu_full[0] == 0
    with pytest.raises(RuntimeError):
        st.stage(WHOLE, Assignment(0, (0,), (1000,)))

    st2 = Statement(snap)
    st2.stage(WHOLE, Assignment(0, (0,), (1000,)))
    assert st2.discard() is snap and st2.staged == ()


def test_same_seed_same_decisions() -> None:
    snap = snapshot(*(node(f"n{i}", [1000, 1000, 700]) for i in range(10)))
    for policy in ("bestfit", "spread", "random", "packing"):
        runs = []
        for _ in range(2):
            scheduler = Scheduler(policy_profile(policy), np.random.default_rng(7), PluginContext())
            s, picks = snap, []
            for _ in range(12):
                result = scheduler.place_task(s, TaskRequest(cpu_milli=500, gpu_count=1, gpu_milli=300))
                s = result.snapshot
                picks.append((result.node_id, result.assignment.gpu_indices if result.assignment else None))
            runs.append(picks)
        assert runs[0] == runs[1]
