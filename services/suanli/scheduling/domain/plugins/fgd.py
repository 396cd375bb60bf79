"""FGD (fragmentation gradient descent): prefer the node, and for shared tasks the device, whose use grows
the node's expected fragmentation least, measured against the typical-task distribution.

`exact=False` is the paper's score, floor(100 * sigmoid(delta / 1000)); its integer truncation makes many
nodes tie and leaves the choice among them to chance. `exact=True` scores with the delta itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._fragmentation import PlacementDeltas
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class FgdScore:
    name = "fgd"

    def __init__(self, deltas: PlacementDeltas, exact: bool) -> None:
        self._deltas = deltas
        self._exact = exact

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        if self._exact:
            return self._deltas.for_rows(snapshot, request, rows)
        return self._deltas.scores_for_rows(snapshot, request, rows)

    def row_local(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool:
        return True  # a node's delta is a function of its own state


def _factory(args: Mapping[str, Any], ctx: PluginContext) -> FgdScore:
    return FgdScore(ctx.placement_deltas("fgd"), exact=args["exact"])


SPECS = [
    PluginSpec(
        FgdScore.name,
        ExtensionPoint.SCORE,
        _factory,
        args={"exact": Arg((bool,), False, help="score with the exact delta instead of the integer sigmoid")},
        help="least fragmentation growth",
    )
]
