"""GpuClustering: keep GPU tasks of the same class (shared / k whole GPUs) together.

Tiers, best first: nodes whose GPU tasks are all of this class (75-100), nodes that mix this class with
others (50-75), nodes without GPU tasks (25-50), nodes with only other classes (0-25); within a tier,
fuller nodes (less free GPU) score higher. CPU-only tasks score 0 everywhere.
"""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import MAX_NODE_GPU_MILLI, MAX_SCORE, free_gpu_total, plain
from suanli.scheduling.domain.snapshot import ClusterSnapshot, gpu_task_class


class ClusteringScore:
    name = "clustering"

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        klass = gpu_task_class(request)
        if klass < 0:
            return np.zeros(rows.size)
        counts = snapshot.class_counts[rows]
        present = counts > 0
        kinds = present.sum(axis=1)
        same = present[:, min(klass, counts.shape[1] - 1)]
        quarter = MAX_SCORE // 4
        tier = np.select([same & (kinds == 1), same, kinds == 0], [3 * quarter, 2 * quarter, quarter], 0)
        fullness = quarter * (MAX_NODE_GPU_MILLI - free_gpu_total(snapshot, rows)) // MAX_NODE_GPU_MILLI
        scores: np.ndarray = (tier + fullness).astype(np.float64)
        return scores


SPECS = [
    PluginSpec(
        ClusteringScore.name,
        ExtensionPoint.SCORE,
        plain(ClusteringScore),
        help="same-class GPU tasks together",
    )
]
