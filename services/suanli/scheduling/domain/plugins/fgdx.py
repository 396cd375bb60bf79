"""fgdx (ours): FGD with the exact fragmentation delta and a best-fit tie-break.

FGD's integer sigmoid score maps every delta within about 40 milli-GPU to the same value, so most decisions
end in a tie resolved at random. Scoring with the delta itself keeps the information, and among nodes with
equal delta (typically identical idle nodes) the one left with less free capacity wins, which keeps large
holes open for the whole-GPU tasks that arrive later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import MAX_NODE_CPU_MILLI, MAX_NODE_GPU_MILLI, free_gpu_total
from suanli.scheduling.domain.plugins._fragmentation import PlacementDeltas
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class FgdxScore:
    name = "fgdx"

    def __init__(self, deltas: PlacementDeltas, tie_weight: float) -> None:
        self._deltas = deltas
        self._tie_weight = tie_weight

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        delta = self._deltas.per_node(snapshot, request)[rows]
        leftover = (snapshot.cpu_free[rows] - request.cpu_milli) / MAX_NODE_CPU_MILLI + (
            free_gpu_total(snapshot, rows) - request.total_gpu_milli
        ) / MAX_NODE_GPU_MILLI
        return delta - self._tie_weight * leftover


def _factory(args: Mapping[str, Any], ctx: PluginContext) -> FgdxScore:
    return FgdxScore(ctx.placement_deltas("fgdx"), tie_weight=args["tie_weight"])


SPECS = [
    PluginSpec(
        FgdxScore.name,
        ExtensionPoint.SCORE,
        _factory,
        args={
            "tie_weight": Arg(
                (int, float),
                1.0,
                check=lambda v: v >= 0,
                help="milli-GPU of delta one unit of leftover is worth",
            )
        },
        help="exact fragmentation delta, best-fit tie-break",
    )
]
