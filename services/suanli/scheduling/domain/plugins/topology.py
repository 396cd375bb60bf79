"""Gang topology: keep a gang on as few nodes as hold it, within one fabric domain, one zone, one region.

A gang is placed task by task; each task is scored knowing where the earlier ones went (`GangContext`).
Every candidate node falls in one tier, best first:

- 4: for the first task, the node alone holds the whole rest of the gang; for a later task, a node the
  gang already uses;
- 3: the node's fabric domain (nodes of one zone with the same `fabric` label: one NVLink/InfiniBand/RoCE
  network) holds the rest of the gang (first task), or is the domain of every node used so far;
- 2: likewise for the node's zone;
- 1: likewise for the node's region;
- 0: none of these.

Tier 4 scores 100; tier t below it scores 25 t + 10 x fill, where fill is the share of the tasks still
to place that fit on the node (so a node holding three of four beats one holding one). The gap between
tiers (at least 15) times the profile's weight is meant to exceed every other score's range, so the tier
decides and the other scores only order nodes within it. How much of the gang fits is counted in copies
of the task being scored: a gang's tasks are usually alike, and a mixed gang only makes the count rough.

Tasks placed on their own score alike everywhere (`score` answers None): the plugin costs single-task
workloads, such as the openb replays, nothing and leaves their decisions as they were.
"""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.plugin import GangContext
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import MAX_SCORE, plain
from suanli.scheduling.domain.snapshot import ClusterSnapshot

TIER_STEP = 25.0
FILL_SPAN = 10.0


def copies(snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, cap: int) -> np.ndarray:
    """[rows] how many tasks shaped like `request` fit on each node at once, at most `cap`."""
    n = np.full(rows.size, cap, dtype=np.int64)
    if request.cpu_milli:
        n = np.minimum(n, snapshot.cpu_free[rows] // request.cpu_milli)
    if request.memory_mib:
        n = np.minimum(n, snapshot.mem_free[rows] // request.memory_mib)
    if request.gpu_count:
        if request.is_shared_gpu:
            per_node = (snapshot.gpu_free[rows] // request.gpu_milli).sum(axis=1)
        else:
            per_node = snapshot.gpu_full[rows] // request.gpu_count
        n = np.minimum(n, per_node)
    return np.maximum(n, 0)


def _domain_holds(codes: np.ndarray, fit: np.ndarray, need: int) -> np.ndarray:
    """[rows] True where the rows sharing the row's domain code (>= 0) hold `need` copies together."""
    known = codes >= 0
    if not known.any():
        return known
    sums = np.bincount(codes[known], weights=fit[known])
    holds = np.zeros(codes.size, dtype=bool)
    holds[known] = sums[codes[known]] >= need
    return holds


def _same_as_all(codes: np.ndarray, used: np.ndarray) -> np.ndarray:
    """[rows] True where the row's domain code (>= 0) is the one every used node has."""
    first = int(used[0])
    if first < 0 or np.any(used != first):
        return np.zeros(codes.size, dtype=bool)
    same: np.ndarray = codes == first
    return same


class TopologyScore:
    name = "topology"

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray | None:
        return None

    def row_local(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool:
        return True  # a task on its own scores alike everywhere

    def score_gang(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        rows: np.ndarray,
        rng: np.random.Generator,
        gang: GangContext,
    ) -> np.ndarray | None:
        need = gang.remaining
        if need < 1 or (need == 1 and not gang.used):
            return None
        fit = copies(snapshot, request, rows, need)
        domains = (snapshot.fabric_code[rows], snapshot.zone_code[rows], snapshot.region_code[rows])
        if gang.used:
            used = np.fromiter(gang.used, dtype=np.intp, count=len(gang.used))
            top = np.isin(rows, used)
            columns = (snapshot.fabric_code, snapshot.zone_code, snapshot.region_code)
            levels = [_same_as_all(c, column[used]) for c, column in zip(domains, columns, strict=True)]
        else:
            top = fit >= need
            levels = [_domain_holds(codes, fit, need) for codes in domains]
        tier = np.select(levels, [3.0, 2.0, 1.0], 0.0)
        scores: np.ndarray = np.where(top, float(MAX_SCORE), TIER_STEP * tier + FILL_SPAN * fit / need)
        return scores


class CpuPoolScore:
    """CPU-only tasks go to nodes without GPUs first: 100 there, 0 on GPU nodes. A GPU node's CPU is what
    its GPUs need to be usable, so a CPU-only task only takes it when no GPU-less node fits. GPU tasks,
    and candidates that are all of one kind, score alike (None)."""

    name = "cpu-pool"

    def __init__(self) -> None:
        self._uniform: tuple[np.ndarray, bool] | None = None

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray | None:
        if request.gpu_count:
            return None
        gpu_less = snapshot.gpu_count[rows] == 0
        if gpu_less.all() or not gpu_less.any():
            return None
        scores: np.ndarray = np.where(gpu_less, float(MAX_SCORE), 0.0)
        return scores

    def row_local(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool:
        """For a CPU-only task the score depends on the kinds of node among the candidates, unless the
        fleet has nodes of one kind only (then it is always None, as for GPU tasks)."""
        if request.gpu_count:
            return True
        uniform = self._uniform
        if uniform is None or uniform[0] is not snapshot.gpu_count:
            gpu_less = snapshot.gpu_count == 0
            uniform = self._uniform = (snapshot.gpu_count, bool(gpu_less.all() or not gpu_less.any()))
        return uniform[1]


SPECS = [
    PluginSpec(
        TopologyScore.name,
        ExtensionPoint.SCORE,
        plain(TopologyScore),
        help="a gang on as few nodes as hold it, then one fabric domain, zone, region",
    ),
    PluginSpec(
        CpuPoolScore.name,
        ExtensionPoint.SCORE,
        plain(CpuPoolScore),
        help="CPU-only tasks on nodes without GPUs first",
    ),
]
