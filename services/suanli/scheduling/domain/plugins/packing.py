"""GpuPacking: prefer partly used devices, then fully free devices on a used node, then idle nodes.

1. the task fits on partly used devices (ascending free milli): 100 - sum(free % of those devices)/10, >= 50;
2. it must use fully free devices on a used node: 50 - number of them, >= 33;
3. the node's devices are all free: max(33 - devices on node, devices on node).
CPU-only tasks score 0 everywhere.
"""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import GPU_MILLI, TaskRequest
from suanli.scheduling.domain.plugins._common import MAX_SCORE, plain
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class PackingScore:
    name = "packing"

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        if request.gpu_count == 0:
            return np.zeros(rows.size)
        devices = snapshot.gpu_count[rows]
        idle_node = snapshot.gpu_full[rows] == devices
        idle_score = np.maximum(MAX_SCORE // 3 - devices, devices)
        if request.is_shared_gpu:
            free = snapshot.gpu_free[rows]
            # The device the task would use: the fitting one with the least free milli.
            used = np.where(free >= request.gpu_milli, free, GPU_MILLI + 1).min(axis=1)
            fully_free_used = (used == GPU_MILLI).astype(np.int64)
            partly_score = np.maximum(MAX_SCORE - (used * 100 // GPU_MILLI) // 10, MAX_SCORE // 2)
        else:
            fully_free_used = np.full(rows.size, request.gpu_count, dtype=np.int64)
            partly_score = np.zeros(rows.size, dtype=np.int64)
        new_devices_score = np.maximum(MAX_SCORE // 2 - fully_free_used, MAX_SCORE // 3)
        score = np.where(fully_free_used > 0, new_devices_score, partly_score)
        scores: np.ndarray = np.where(idle_node, idle_score, score).astype(np.float64)
        return scores


SPECS = [
    PluginSpec(PackingScore.name, ExtensionPoint.SCORE, plain(PackingScore), help="fill used devices first")
]
