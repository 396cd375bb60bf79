"""Network-aware placement: a filter that keeps a job's tasks within its RTT bound of the data region and
off regions whose path to it is DOWN, and a score that prefers a lower RTT to the data region.

Both read the cycle's network snapshot (`PluginContext.network`) and decide per region, then spread the
answer over the nodes by their region code: one lookup per region, one gather per call. A request without
a data region passes the filter everywhere and scores 0 everywhere, so profiles that list these plugins
decide exactly as before for jobs that say nothing about the network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.network import LinkStatus, NetworkSnapshot, allowed_regions
from suanli.scheduling.domain.plugins._common import MAX_SCORE
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class NetworkFilter:
    """Nodes whose region is too far from the job's data region (max_rtt_ms) or cut off from it (DOWN)."""

    name = "network"

    def __init__(self, ctx: PluginContext) -> None:
        self._ctx = ctx
        # Per (network, regions of the snapshot, data region, bound): the allowed regions. A gang asks
        # once per task against the same network and regions; the answer is the same every time.
        self._allowed: dict[tuple[NetworkSnapshot, tuple[str, ...], str, float | None], np.ndarray] = {}

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray | None:
        if not request.data_region:
            return None
        network = self._ctx.network
        key = (network, snapshot.regions, request.data_region, request.max_rtt_ms)
        allowed = self._allowed.get(key)
        if allowed is None:
            allowed = self._allowed[key] = allowed_regions(network, request, snapshot.regions)
        mask: np.ndarray = allowed[snapshot.region_code]
        return mask

    def filter_rows(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray | slice
    ) -> np.ndarray | None:
        mask = self.filter(snapshot, request)
        return None if mask is None else mask[rows]


class NetworkScore:
    """Lower RTT to the data region scores higher: 100 at 0 ms falling linearly to 0 at `rtt_scale_ms`;
    a DEGRADED path loses `degraded_penalty` of its score; an unmeasured path scores 0."""

    name = "network"

    def __init__(self, ctx: PluginContext, rtt_scale_ms: float, degraded_penalty: float) -> None:
        self._ctx = ctx
        self._scale = float(rtt_scale_ms)
        self._penalty = float(degraded_penalty)

    def region_scores(self, request: TaskRequest, regions: Sequence[str]) -> np.ndarray:
        """0..100 per region (all 0 without a data region)."""
        if not request.data_region:
            return np.zeros(len(regions))
        paths = self._ctx.network.paths_to(request.data_region, regions)
        rtt = np.nan_to_num(paths.rtt_ms, nan=self._scale)
        score = MAX_SCORE * np.clip(1.0 - rtt / self._scale, 0.0, 1.0)
        score = np.where(paths.status == LinkStatus.DEGRADED, score * (1.0 - self._penalty), score)
        scores: np.ndarray = np.where(paths.down, 0.0, score)
        return scores

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray | None:
        if not request.data_region:
            return None
        scores: np.ndarray = self.region_scores(request, snapshot.regions)[snapshot.region_code[rows]]
        return scores

    def row_local(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool:
        return True  # per region, from the context's network


def _filter(args: Mapping[str, Any], ctx: PluginContext) -> NetworkFilter:
    return NetworkFilter(ctx)


def _score(args: Mapping[str, Any], ctx: PluginContext) -> NetworkScore:
    return NetworkScore(ctx, **args)


SPECS = [
    PluginSpec(NetworkFilter.name, ExtensionPoint.FILTER, _filter, help=(NetworkFilter.__doc__ or "")),
    PluginSpec(
        NetworkScore.name,
        ExtensionPoint.SCORE,
        _score,
        args={
            "rtt_scale_ms": Arg(
                (int, float), 300.0, lambda v: v > 0, "RTT at which the score reaches 0 (milliseconds)"
            ),
            "degraded_penalty": Arg(
                (int, float), 0.5, lambda v: 0 <= v <= 1, "share of the score a DEGRADED path loses"
            ),
        },
        help=(NetworkScore.__doc__ or "").split("\n")[0],
    ),
]
