"""Spread (least allocated): prefer the node with the largest free share of CPU, memory and (where the node
has devices) GPU after placement. Balances load; the opposite of packing."""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import GPU_MILLI, TaskRequest
from suanli.scheduling.domain.plugins._common import MAX_SCORE, free_gpu_total, plain
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class SpreadScore:
    name = "spread"

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        cpu = (snapshot.cpu_free[rows] - request.cpu_milli) / np.maximum(snapshot.cpu_capacity[rows], 1)
        mem = (snapshot.mem_free[rows] - request.memory_mib) / np.maximum(snapshot.mem_capacity[rows], 1)
        gpu_cap = snapshot.gpu_count[rows] * GPU_MILLI
        has_gpu = gpu_cap > 0
        gpu = np.where(
            has_gpu, (free_gpu_total(snapshot, rows) - request.total_gpu_milli) / np.maximum(gpu_cap, 1), 0.0
        )
        scores: np.ndarray = MAX_SCORE * (cpu + mem + gpu) / (2 + has_gpu)
        return scores


SPECS = [PluginSpec(SpreadScore.name, ExtensionPoint.SCORE, plain(SpreadScore), help="least allocated")]
