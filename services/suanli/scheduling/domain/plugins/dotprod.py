"""DotProd (Tetris): prefer the node whose free (CPU, GPU) vector has the smallest dot product with the
request, both normalised by the largest node shape; score = floor(100 * (1 - dot / 2))."""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import (
    MAX_NODE_CPU_MILLI,
    MAX_NODE_GPU_MILLI,
    MAX_SCORE,
    free_gpu_total,
    plain,
)
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class DotProdScore:
    name = "dotprod"

    def __init__(self, cpu_scale: int, gpu_scale: int) -> None:
        self._cpu_scale = float(cpu_scale)
        self._gpu_scale = float(gpu_scale)

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        dot = (snapshot.cpu_free[rows] / self._cpu_scale) * (request.cpu_milli / self._cpu_scale) + (
            free_gpu_total(snapshot, rows) / self._gpu_scale
        ) * (request.total_gpu_milli / self._gpu_scale)
        scores: np.ndarray = np.floor(MAX_SCORE * (1.0 - dot / 2.0))
        return scores


SPECS = [
    PluginSpec(
        DotProdScore.name,
        ExtensionPoint.SCORE,
        plain(DotProdScore),
        args={
            "cpu_scale": Arg(
                (int,), MAX_NODE_CPU_MILLI, check=lambda v: v > 0, help="milli-CPU of a full node"
            ),
            "gpu_scale": Arg(
                (int,), MAX_NODE_GPU_MILLI, check=lambda v: v > 0, help="milli-GPU of a full node"
            ),
        },
        help="Tetris dot product (smallest wins)",
    )
]
