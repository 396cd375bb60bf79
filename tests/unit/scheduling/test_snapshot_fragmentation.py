"""Fragmentation measure on hand-computed examples (METHOD.md section 3)."""

from __future__ import annotations

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.scheduling.domain.fragmentation import FragmentationModel, TypicalTask, typical_tasks
from suanli.scheduling.domain.model import TaskRequest

SHARE_500 = TypicalTask(cpu_milli=1000, gpu_milli=500, gpu_count=1, gpu_models=(), weight=0.5)
WHOLE_2 = TypicalTask(cpu_milli=1000, gpu_milli=1000, gpu_count=2, gpu_models=(), weight=0.25)
CPU_ONLY = TypicalTask(cpu_milli=4000, gpu_milli=0, gpu_count=0, gpu_models=(), weight=0.25)
MODEL = FragmentationModel([SHARE_500, WHOLE_2, CPU_ONLY])


@pytest.mark.parametrize(
    ("gpus", "cpu", "model", "expected"),
    [
        # idle 2-GPU node: both GPU tasks fit with nothing left too small; CPU-only counts all 2000 idle.
        ([1000, 1000], 32_000, "A100", 0.25 * 2000),
        # 300 + 1000 free: share fits, the 300 sliver is frag for it (0.5*300); the 2-GPU task does not fit
        # (0.25*1300); CPU-only 0.25*1300.
        ([300, 1000], 32_000, "A100", 0.5 * 300 + 0.25 * 1300 + 0.25 * 1300),
        # no CPU left: every GPU task lacks CPU, so all idle milli is fragment for everyone.
        ([1000, 1000], 0, "A100", 2000.0),
        # fully used node has nothing to fragment.
        ([0, 0], 32_000, "A100", 0.0),
    ],
)
def test_node_fragmentation_matches_hand_computation(
    gpus: list[int], cpu: int, model: str, expected: float
) -> None:
    snap = snapshot(node("n", gpus, free_cpu=cpu, model=model))
    assert MODEL.node_fragmentation(snap)[0] == pytest.approx(expected)


def test_model_allow_list_makes_other_models_no_access() -> None:
    only_t4 = TypicalTask(cpu_milli=0, gpu_milli=500, gpu_count=1, gpu_models=("T4",), weight=1.0)
    model = FragmentationModel([only_t4])
    snap = snapshot(node("a", [1000], model="A100"), node("t", [1000], model="T4"))
    assert model.node_fragmentation(snap).tolist() == [1000.0, 0.0]


def test_typical_tasks_keep_most_popular_until_coverage_and_renormalise() -> None:
    a = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=500)
    b = TaskRequest(cpu_milli=2000, gpu_count=1, gpu_milli=1000)
    c = TaskRequest(cpu_milli=3000)
    d = TaskRequest(cpu_milli=1000, memory_mib=99, gpu_count=1, gpu_milli=500)  # memory is ignored: same as a
    requests = [a] * 5 + [d] * 1 + [b] * 3 + [c] * 1
    tasks = typical_tasks(requests, coverage=0.85)
    assert [(t.cpu_milli, t.gpu_milli, t.gpu_count) for t in tasks] == [(1000, 500, 1), (2000, 1000, 1)]
    assert [t.weight for t in tasks] == pytest.approx([6 / 9, 3 / 9])
    assert sum(t.weight for t in typical_tasks(requests, coverage=1.0)) == pytest.approx(1.0)


def test_vectorised_stats_agree_with_direct_count() -> None:
    rng = np.random.default_rng(0)
    free = rng.choice([0, 100, 300, 500, 700, 1000], size=(20, 4)).astype(np.int32)
    s = MODEL.stats(free, np.full(20, 8000), np.zeros(20, dtype=np.int32))
    for i, thr in enumerate(MODEL.thresholds):
        assert s.count_at_least[:, i].tolist() == (free >= thr).sum(axis=1).tolist()
        assert s.sum_below[:, i].tolist() == np.where(free < thr, free, 0).sum(axis=1).tolist()
