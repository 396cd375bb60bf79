"""Small helpers shared by the score and device plugins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot

MAX_SCORE = 100
# Normalisers of the FGD paper's simulator: the largest node it models has 128 cores and 8 GPUs.
MAX_NODE_CPU_MILLI = 128_000
MAX_NODE_GPU_MILLI = 8_000


def free_gpu_total(snapshot: ClusterSnapshot, rows: np.ndarray) -> np.ndarray:
    total: np.ndarray = snapshot.gpu_free[rows].sum(axis=1, dtype=np.int64)
    return total


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """FGD's node score: floor(100 * sigmoid(delta / 1000)), delta in milli-GPU."""
    return np.floor(MAX_SCORE / (1.0 + np.exp(-delta / 1000.0)))


def fitting_devices(snapshot: ClusterSnapshot, request: TaskRequest, node: int) -> np.ndarray:
    """Device indices of `node` with room for one share of the request, lowest index first."""
    return np.flatnonzero(snapshot.live().gpu_free[node, : snapshot.gpu_count[node]] >= request.gpu_milli)


def whole_devices(snapshot: ClusterSnapshot, request: TaskRequest, node: int) -> Assignment:
    """Whole-device tasks take the lowest-index fully free devices: they are interchangeable."""
    idx = fitting_devices(snapshot, request, node)[: request.gpu_count]
    if idx.size < request.gpu_count:
        raise ValueError(f"{snapshot.node_ids[node]}: not enough free devices")
    return Assignment(node, tuple(int(i) for i in idx), (request.gpu_milli,) * request.gpu_count)


def shared_on(node: int, device: int, request: TaskRequest) -> Assignment:
    return Assignment(node, (int(device),), (request.gpu_milli,))


def assign_devices(
    snapshot: ClusterSnapshot,
    request: TaskRequest,
    node: int,
    pick_shared: Callable[[np.ndarray], int],
) -> Assignment:
    """The devices `request` takes on `node`. Device policies differ only in `pick_shared`, which chooses
    a shared task's device among the fitting ones (lowest index first, never empty)."""
    if request.gpu_count == 0:
        return Assignment(node)
    if not request.is_shared_gpu:
        return whole_devices(snapshot, request, node)
    options = fitting_devices(snapshot, request, node)
    if options.size == 0:
        raise ValueError(f"{snapshot.node_ids[node]}: no device fits {request.gpu_milli} milli")
    return shared_on(node, pick_shared(options), request)


def first_best_device(options: np.ndarray, delta: np.ndarray) -> int:
    """FGD's device rule: the first of `options` with the best integer score of its fragmentation `delta`."""
    score = sigmoid_score(delta)
    return int(options[np.flatnonzero(score == score.max())[0]])


def plain(cls: Callable[..., Any]) -> Callable[[Mapping[str, Any], PluginContext], Any]:
    """Factory for plugins that take their (validated) arguments as keywords and need no context."""

    def factory(args: Mapping[str, Any], ctx: PluginContext) -> Any:
        return cls(**args)

    return factory
