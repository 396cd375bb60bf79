"""Random: one feasible node, drawn uniformly, scores 100 and the rest 0 (whatever the tie-break rule)."""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import plain
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class RandomScore:
    name = "random"

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        score = np.zeros(rows.size)
        score[rng.integers(rows.size)] = 100.0
        return score


SPECS = [
    PluginSpec(RandomScore.name, ExtensionPoint.SCORE, plain(RandomScore), help="uniform among feasible")
]
