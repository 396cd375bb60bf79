"""GPU fragmentation against a workload distribution (FGD, Weng et al., USENIX ATC '23).

A node's idle GPU milli is *fragmented for* a typical task when that task could not use it: the task needs
no GPU, may not use this GPU model, or does not fit (too few devices with enough free milli, or too little
CPU); when it does fit, only the devices too small for it are fragments. A node's fragmentation is the
expectation over the typical-task distribution, in milli-GPU. Memory never enters the measure.

Everything here is vectorised over rows of node state so that a scorer can evaluate thousands of
hypothetical placements at once. Per-node state is reduced to a few statistics per distinct GPU-milli
threshold of the typical tasks: how many devices have at least that much free, and how much free milli sits
on devices below it. Fragmentation is a weighted sum over typical tasks of expressions in those statistics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class TypicalTask:
    cpu_milli: int
    gpu_milli: int
    gpu_count: int
    gpu_models: tuple[str, ...]
    weight: float


def shape_of(request: TaskRequest) -> tuple[int, int, int, tuple[str, ...]]:
    """The grouping key of the FGD paper: memory is ignored."""
    return (request.cpu_milli, request.gpu_milli, request.gpu_count, request.gpu_models)


def typical_tasks(requests: Iterable[TaskRequest], coverage: float = 0.95) -> tuple[TypicalTask, ...]:
    """The most popular request shapes covering at least `coverage` of all requests, weights renormalised.

    Groups are ranked by count, most popular first; ties keep first-seen order so the result is a pure
    function of the request sequence.
    """
    if not 0 < coverage <= 1:
        raise ValueError("coverage must be in (0, 1]")
    counts = Counter(shape_of(r) for r in requests)
    total = sum(counts.values())
    if total == 0:
        raise ValueError("no requests to learn a distribution from")
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: first-seen order among equal counts
    kept: list[tuple[tuple[int, int, int, tuple[str, ...]], int]] = []
    covered = 0
    for shape, count in ranked:
        kept.append((shape, count))
        covered += count
        if covered >= coverage * total:
            break
    return tuple(
        TypicalTask(cpu_milli=s[0], gpu_milli=s[1], gpu_count=s[2], gpu_models=s[3], weight=c / covered)
        for s, c in kept
    )


@dataclass(frozen=True, slots=True)
class NodeStats:
    """Per-row statistics from which fragmentation follows (rows are nodes or hypothetical node states)."""

    count_at_least: np.ndarray  # [rows, thresholds] devices with free >= threshold
    sum_below: np.ndarray  # [rows, thresholds] free milli on devices with free < threshold
    idle: np.ndarray  # [rows] free milli on all devices
    cpu_free: np.ndarray  # [rows]
    model_code: np.ndarray  # [rows]


class FragmentationModel:
    """A typical-task distribution compiled for vectorised evaluation."""

    def __init__(self, tasks: Sequence[TypicalTask]) -> None:
        if not tasks:
            raise ValueError("a fragmentation model needs at least one typical task")
        self.tasks = tuple(tasks)
        weights = np.array([t.weight for t in tasks], dtype=np.float64)
        self.total_weight = float(weights.sum())
        gpu = np.array([t.gpu_count > 0 for t in tasks])
        # Only GPU tasks can ever leave a node's idle milli un-fragmented; CPU-only tasks count it all.
        self._gpu_tasks = [t for t, g in zip(tasks, gpu, strict=True) if g]
        self.thresholds = np.array(sorted({t.gpu_milli for t in self._gpu_tasks}) or [1], dtype=np.int32)
        position = {int(v): i for i, v in enumerate(self.thresholds)}
        self._threshold_of = np.array([position[t.gpu_milli] for t in self._gpu_tasks], dtype=np.intp)
        self._need_devices = np.array([t.gpu_count for t in self._gpu_tasks], dtype=np.int32)
        self._need_cpu = np.array([t.cpu_milli for t in self._gpu_tasks], dtype=np.int64)
        self._weight = np.array([t.weight for t in self._gpu_tasks], dtype=np.float64)
        self._weights_by_models: dict[tuple[str, ...], np.ndarray] = {}

    def _weights_for(self, models: tuple[str, ...]) -> np.ndarray:
        """[model code + 1, gpu tasks] weight of each GPU task on a node of that model, 0 where not allowed.
        Row 0 stands for nodes without GPUs (code -1)."""
        table = self._weights_by_models.get(models)
        if table is None:
            table = np.zeros((len(models) + 1, len(self._gpu_tasks)), dtype=np.float64)
            for j, task in enumerate(self._gpu_tasks):
                for code, model in enumerate(models):
                    if not task.gpu_models or model in task.gpu_models:
                        table[code + 1, j] = task.weight
            self._weights_by_models[models] = table
        return table

    # -- statistics ---------------------------------------------------------------------------------------

    def stats(self, gpu_free: np.ndarray, cpu_free: np.ndarray, model_code: np.ndarray) -> NodeStats:
        free = gpu_free[:, :, None]
        thr = self.thresholds[None, None, :]
        below = free < thr
        return NodeStats(
            count_at_least=(~below).sum(axis=1, dtype=np.int32),
            sum_below=(free * below).sum(axis=1, dtype=np.int64),
            idle=gpu_free.sum(axis=1, dtype=np.int64),
            cpu_free=np.array(cpu_free, dtype=np.int64),
            model_code=np.asarray(model_code),
        )

    def fragmentation(self, s: NodeStats, models: tuple[str, ...]) -> np.ndarray:
        """Expected fragmented milli-GPU of each row."""
        idle = s.idle.astype(np.float64)
        if not self._gpu_tasks:
            return idle * self.total_weight
        weight = self._weights_for(models)[s.model_code + 1]
        fits = (s.count_at_least[:, self._threshold_of] >= self._need_devices) & (
            s.cpu_free[:, None] >= self._need_cpu
        )
        usable = idle[:, None] - s.sum_below[:, self._threshold_of]
        measure: np.ndarray = idle * self.total_weight - np.einsum("ij,ij->i", weight * fits, usable)
        return measure

    def node_fragmentation(self, snapshot: ClusterSnapshot, rows: np.ndarray | None = None) -> np.ndarray:
        """Fragmentation of the given nodes (all when `rows` is None) in `snapshot`."""
        if rows is None:
            rows = np.arange(snapshot.size)
        s = self.stats(snapshot.gpu_free[rows], snapshot.cpu_free[rows], snapshot.model_code[rows])
        return self.fragmentation(s, snapshot.models)
