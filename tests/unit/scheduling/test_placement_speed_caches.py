"""The caches that keep a decision at 50,000 nodes cheap give what a pass over every node gives: the state
table's per-state count and lowest node, the free GPU per model, the integer scores kept with the deltas,
and the small-array helpers of the hot paths."""

from __future__ import annotations

import numpy as np
import pytest
from _placement_cluster import node, snapshot

from suanli.scheduling.domain.fragmentation import TypicalTask
from suanli.scheduling.domain.framework import Statement
from suanli.scheduling.domain.framework.cache import FreeGpuByModel
from suanli.scheduling.domain.framework.scheduler import PackedKeys, _packable, _shift
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins import _fragmentation
from suanli.scheduling.domain.plugins._common import sigmoid_score
from suanli.scheduling.domain.plugins._fragmentation import (
    FragmentationTracker,
    PlacementDeltas,
    StateTable,
)
from suanli.scheduling.domain.plugins.fgdb import StrandingModel
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot, sorted_unique

SHARE = TaskRequest(cpu_milli=4000, memory_mib=10, gpu_count=1, gpu_milli=500)
WHOLE = TaskRequest(cpu_milli=8000, memory_mib=10, gpu_count=1, gpu_milli=1000)
CPU = TaskRequest(cpu_milli=6000, memory_mib=10)
TASKS = (
    TypicalTask(4000, 500, 1, (), 0.5),
    TypicalTask(8000, 1000, 1, ("V100",), 0.3),
    TypicalTask(6000, 0, 0, (), 0.2),
)


def _cluster(copies: int) -> ClusterSnapshot:
    """`copies` of four node kinds, interleaved: many nodes share a state."""
    kinds = [
        ("a", [1000, 1000], 32_000, "A100"),
        ("v", [1000, 1000, 1000, 1000], 64_000, "V100"),
        ("t", [1000], 16_000, "T4"),
        ("c", [], 48_000, "A100"),
    ]
    return snapshot(
        *(node(f"{k}{i}", gpus, cpu=cpu, model=model) for i in range(copies) for k, gpus, cpu, model in kinds)
    )


def _walk(root: ClusterSnapshot, steps: int, seed: int) -> list[ClusterSnapshot]:
    """Snapshots of one family after random placements, with staged gangs discarded on the way (so the
    working arrays swap between branches), lowest nodes of each state included."""
    rng = np.random.default_rng(seed)
    out, snap = [root], root
    for step in range(steps):
        statement = Statement(snap)
        for _ in range(2):
            view = statement.snapshot
            row = 0 if step % 5 == 0 else int(rng.integers(view.size))
            request = (SHARE, WHOLE, CPU)[int(rng.integers(3))]
            free = view.gpu_free[row, : view.gpu_count[row]]
            if request.gpu_count and view.cpu_free[row] >= request.cpu_milli:
                fits = np.flatnonzero(free >= request.gpu_milli)
                if fits.size:
                    where = Assignment(row, (int(fits[0]),), (request.gpu_milli,))
                    statement.stage(request, where)
            elif not request.gpu_count and view.cpu_free[row] >= request.cpu_milli:
                statement.stage(request, Assignment(row))
            out.append(statement.snapshot)
        snap = statement.discard() if step % 3 == 2 else statement.commit()
        out.append(snap)
    return out


def _states(snap: ClusterSnapshot) -> np.ndarray:
    return np.column_stack((snap.cpu_free, snap.model_code, snap.gpu_free))


@pytest.mark.parametrize(("seed", "lookups"), [(1, 8), (2, 8), (3, 0)])
def test_the_state_table_groups_the_whole_cluster_as_a_pass_over_every_node(
    monkeypatch: pytest.MonkeyPatch, seed: int, lookups: int
) -> None:
    """Lowest nodes that left their state are looked up one by one, or (`lookups` 0) in one pass."""
    monkeypatch.setattr(_fragmentation, "LOOKUPS_PER_PASS", lookups)
    table = StateTable()
    snaps = _walk(_cluster(12), 60, seed)
    order = np.random.default_rng(seed).permutation(len(snaps))  # older snapshots are read again too
    for snap in [snaps[i] for i in order]:
        first, inverse = table.groups(snap)
        keys = _states(snap)
        # Each group's first node is the lowest node in that state, and every node maps to its group.
        _, lowest = np.unique(keys, axis=0, return_index=True)
        assert sorted(first.tolist()) == sorted(lowest.tolist())
        assert np.array_equal(keys[first][inverse], keys)
        assert first.tolist() == sorted(first.tolist(), key=lambda row: table.of_node[row])
        # `spread` puts each state's value on all its nodes.
        firsts, present = table.distinct(snap)
        assert np.array_equal(firsts, first)
        assert np.array_equal(table.spread(firsts.astype(float), present), first[inverse].astype(float))


def test_free_gpu_per_model_follows_every_snapshot_of_the_family() -> None:
    free = FreeGpuByModel()
    snaps = _walk(_cluster(6), 40, 3)
    for snap in [*snaps, *reversed(snaps), _cluster(3)]:  # back along the family, then a new one
        has = snap.model_code >= 0
        expected = np.bincount(
            snap.model_code[has], weights=snap.gpu_free[has].sum(axis=1), minlength=len(snap.models)
        )
        got = free.totals(snap)
        assert got.dtype == np.float64 and got.tolist() == expected.tolist()


@pytest.mark.parametrize("dedup", [8, 10_000])
def test_kept_scores_are_the_integer_scores_of_the_deltas(
    monkeypatch: pytest.MonkeyPatch, dedup: int
) -> None:
    """With grouping (a first use scores each state once) and without."""
    monkeypatch.setattr(_fragmentation, "DEDUP_MIN_ROWS", dedup)
    scored = PlacementDeltas(FragmentationTracker(StrandingModel(TASKS, 0.25), StateTable()))
    plain = PlacementDeltas(FragmentationTracker(StrandingModel(TASKS, 0.25), StateTable()))
    rows = np.arange(0, 48, 3)
    seen = []
    for snap in _walk(_cluster(12), 30, 4):
        for request in (SHARE, WHOLE, CPU):
            scores = scored.scores_for_rows(snap, request, rows)
            deltas = plain.for_rows(snap, request, rows)
            assert np.array_equal(scores, sigmoid_score(deltas))
            assert np.array_equal(scored.for_rows(snap, request, rows), deltas)
            seen.append(deltas)
    every = np.concatenate(seen)
    assert np.isfinite(every).any() and np.isinf(every).any()  # nodes that fit and nodes that do not


def test_sorted_unique_is_numpys_unique() -> None:
    rng = np.random.default_rng(0)
    for size in (1, 2, 5, 16, 17, 40, 500):
        rows = rng.integers(0, max(2, size // 2), size).astype(np.int64)
        assert sorted_unique(rows).tolist() == np.unique(rows).tolist()


def test_packing_check_on_a_whole_cluster() -> None:
    """The vectorised check (a first use) says what the element-wise one says."""
    nodes = 50_000
    bound = 2.0**52 / _shift(nodes)
    cases = {
        "whole": (True, [3.0, -np.inf, 0.0, -7.0, 100.0]),
        "all ruled out": (True, [-np.inf, -np.inf]),
        "fraction": (False, [3.0, 2.5, -np.inf]),
        "too large": (False, [bound, 1.0]),
        "too small": (False, [-bound, 1.0, -np.inf]),
        "inf": (False, [np.inf, 1.0]),
        "nan": (False, [np.nan, 1.0]),
    }
    for name, (expected, values) in cases.items():
        assert _packable(np.array(values), nodes) is expected, name  # the few one decision changed
        assert _packable(np.array(values * 8), nodes) is expected, name  # a first use: every node


def test_packed_keys_follow_updates_as_if_built_again() -> None:
    """The block maxima kept through updates of a few rows (the maximum moving up, or its holder going
    down) and of many rows are those of keys built from scratch."""
    rng = np.random.default_rng(9)
    nodes = 3000
    positions = rng.permutation(nodes)
    total = rng.integers(0, 5, nodes).astype(float)
    total[rng.random(nodes) < 0.2] = -np.inf
    keys = PackedKeys(total, positions)
    for step in range(300):
        count = 40 if step % 10 == 0 else int(rng.integers(1, 6))
        rows = np.unique(rng.integers(0, nodes, count))
        if step % 7 == 0:  # the holder of the best key goes down
            rows = np.unique(np.append(rows, keys.best()))
        total[rows] = rng.integers(-1, 6, rows.size).astype(float)
        total[rows[total[rows] < 0]] = -np.inf
        keys.update(rows, total[rows], positions[rows])
        again = PackedKeys(total, positions)
        assert np.array_equal(keys._blocks, again._blocks)
        assert keys.best() == again.best()
