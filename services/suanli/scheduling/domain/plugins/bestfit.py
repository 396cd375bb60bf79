"""BestFit: prefer the node left with the least free CPU and GPU (each normalised by the largest node
shape, weighted equally), min-max normalised across the feasible nodes."""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import (
    MAX_NODE_CPU_MILLI,
    MAX_NODE_GPU_MILLI,
    MAX_SCORE,
    free_gpu_total,
    plain,
)
from suanli.scheduling.domain.snapshot import ClusterSnapshot


def normalise(scores: np.ndarray) -> np.ndarray:
    """Integer min-max scaling to 0..100, as kube-scheduler's NormalizeScore does."""
    lo, hi = scores.min(), scores.max()
    if hi == lo:
        return scores
    scaled: np.ndarray = (scores - lo) * MAX_SCORE // (hi - lo)
    return scaled


class BestFitScore:
    name = "bestfit"

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        leftover = (
            0.5 * (snapshot.cpu_free[rows] - request.cpu_milli) / MAX_NODE_CPU_MILLI
            + 0.5 * (free_gpu_total(snapshot, rows) - request.total_gpu_milli) / MAX_NODE_GPU_MILLI
        )
        raw = np.floor(MAX_SCORE * (1.0 - leftover))
        return normalise(raw).astype(np.float64)


SPECS = [
    PluginSpec(BestFitScore.name, ExtensionPoint.SCORE, plain(BestFitScore), help="least leftover CPU+GPU")
]
