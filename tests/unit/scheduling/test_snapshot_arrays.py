from __future__ import annotations

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.snapshot import Assignment


def test_columns_are_padded_and_read_only() -> None:
    snap = snapshot(node("a", [1000, 400]), node("b", [], cpu=8000), node("c", [1000] * 4, model="T4"))
    assert snap.gpu_free.shape == (3, 4)
    assert snap.gpu_free[0].tolist() == [1000, 400, 0, 0]
    assert snap.gpu_full.tolist() == [1, 0, 4]
    assert snap.gpu_max.tolist() == [1000, 0, 1000]
    assert snap.models == ("A100", "T4")
    assert snap.model_code.tolist() == [0, -1, 1]
    assert snap.total_gpu_milli == 6000
    with pytest.raises(ValueError):
        snap.cpu_free[0] = 1


def test_assign_returns_new_snapshot_and_leaves_old_untouched() -> None:
    snap = snapshot(node("a", [1000, 1000]), node("b", [1000]))
    request = TaskRequest(cpu_milli=4000, memory_mib=1024, gpu_count=1, gpu_milli=300)
    after = snap.assign(request, Assignment(0, (1,), (300,)))
    assert after.gpu_free[0].tolist() == [1000, 700]
    assert after.cpu_free[0] == 28_000 and after.mem_free[0] == 65_536 - 1024
    assert after.gpu_full[0] == 1 and after.gpu_max[0] == 1000
    assert after.class_counts[0, 0] == 1  # one shared-GPU task on node a
    assert snap.gpu_free[0].tolist() == [1000, 1000]
    assert after.node_stamp[0] != snap.node_stamp[0] and after.node_stamp[1] == snap.node_stamp[1]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (Assignment(0, (0,), (1000,)), "device 0 has 500"),
        (Assignment(0, (5,), (300,)), "no device 5"),
        (Assignment(0, (), ()), "task needs 1"),
    ],
)
def test_assign_rejects_what_does_not_fit(where: Assignment, message: str) -> None:
    snap = snapshot(node("a", [500]))
    request = TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=1000 if where.gpu_milli == (1000,) else 300)
    with pytest.raises(ValueError, match=message):
        snap.assign(request, where)


def test_release_restores_resources_with_a_fresh_stamp() -> None:
    snap = snapshot(node("a", [1000, 1000]))
    request = TaskRequest(cpu_milli=2000, gpu_count=2, gpu_milli=1000)
    where = Assignment(0, (0, 1), (1000, 1000))
    used = snap.assign(request, where)
    back = used.release(request, where)
    assert np.array_equal(back.gpu_free, snap.gpu_free) and back.cpu_free[0] == 32_000
    assert back.class_counts[0, 2] == 0
    assert len({snap.node_stamp[0], used.node_stamp[0], back.node_stamp[0]}) == 3
