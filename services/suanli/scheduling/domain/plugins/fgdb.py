"""fgdb (ours): FGD with three terms the paper's measure does not see: CPU stranding, GPU-model pressure
and the pairing of shared tasks.

Instrumenting FGD on openb (`default`, seed 42, at 100 % arrived) showed where its unallocated GPUs sit:
≈186 GPUs are 190-milli slivers next to 810-milli tasks (structural: only ≤ 190-milli tasks fit there, and
FGD already puts almost all of them there), while 83 idle GPUs sit on nodes with less CPU left than any
GPU task needs (16 of them fully free devices). G2 nodes (12 cores per GPU) ran out of CPU (9 % free)
while T4 nodes (≈ 50 cores per GPU) kept 37 % free. FGD's measure only notices CPU when a node falls
below a typical task's request, so until that cliff it is indifferent to where CPU goes. On `gpuspec*`
the failures are tasks restricted to scarce models (T4, P100, V100) whose devices unrestricted tasks took.

1. CPU stranding. Each GPU model has a typical CPU need per GPU milli, r (demand-weighted over the typical
   GPU tasks that may use the model). A node with `idle` free GPU milli and `cpu` free CPU can at best
   use cpu / r of its idle GPU; the rest, max(0, idle - cpu / r), is stranded. fgdb adds `lam` x stranded
   milli to each node's FGD fragmentation, so the usual delta (before - after) also charges placements
   that use CPU out of proportion on CPU-poor nodes and rewards them on CPU-rich ones.
2. Model pressure. For every model k, `pressure_k` = (expected share of future GPU demand that only a
   set of models including k can take, split over that set by free GPU) / (k's share of the free GPU).
   A GPU task's delta on a node of model k is lowered by `mu` x pressure_k x the task's GPU milli, so
   tasks that may run anywhere keep off the models restricted tasks depend on, and a restricted task with
   several allowed models picks the least pressed one. Without restricted typical tasks it is zero.
3. Pairing. A shared task's option on a device with `was` free milli loses `nu` x its regret
   (`pairing.py`): how much of the best filling of that gap, priced by the cutting-stock LP of the typical
   sizes, the task spoils. It steers a 320 into the 350 a 650 leaves and a 230 to a 550's 450, where FGD
   (which sees one future task per gap, not which sizes complete it) took the tightest gap.

Everything else is FGD's: the integer sigmoid score, whose ties the scheduler's ordered tie-break resolves
towards the earliest node in a seeded ranking (this concentration is what keeps nodes whole), and the
device choice on the node (first device with the best integer score of the same delta).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from suanli.scheduling.domain.fragmentation import FragmentationModel, NodeStats, TypicalTask
from suanli.scheduling.domain.framework.cache import FreeGpuByModel
from suanli.scheduling.domain.framework.plugin import PluginContext, ProfileError
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.pairing import gap_prices
from suanli.scheduling.domain.plugins._common import assign_devices, first_best_device, sigmoid_score
from suanli.scheduling.domain.plugins._fragmentation import (
    FragmentationTracker,
    PlacementDeltas,
    StateTable,
)
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot


def _allowed(task: TypicalTask, model: str) -> bool:
    return not task.gpu_models or model in task.gpu_models


class StrandingModel(FragmentationModel):
    """FGD's fragmentation plus `lam` x the GPU milli a node's free CPU cannot serve at the typical ratio;
    a shared task's device options also pay `nu` x their pairing regret (`pairing.py`)."""

    def __init__(self, tasks: Sequence[TypicalTask], lam: float, nu: float = 0.0) -> None:
        super().__init__(tasks)
        self.lam = lam
        self.nu = nu
        self._prices = gap_prices(tuple(tasks)) if nu > 0 else None
        self._gpu_typical = [t for t in tasks if t.gpu_count > 0]
        self._ratio_by_models: dict[tuple[str, ...], np.ndarray] = {}

    def cpu_per_gpu_milli(self, models: tuple[str, ...]) -> np.ndarray:
        """[model code + 1] demand-weighted CPU milli per GPU milli of the typical GPU tasks allowed on each
        model; inf (nothing stranded) for nodes without GPUs (code -1) and models no GPU task may use."""
        ratio = self._ratio_by_models.get(models)
        if ratio is None:
            ratio = np.full(len(models) + 1, np.inf)
            for code, model in enumerate(models):
                allowed = [t for t in self._gpu_typical if _allowed(t, model)]
                gpu = sum(t.weight * t.gpu_milli * t.gpu_count for t in allowed)
                if gpu > 0:
                    ratio[code + 1] = sum(t.weight * t.cpu_milli for t in allowed) / gpu
            self._ratio_by_models[models] = ratio
        return ratio

    def device_delta(self, was: np.ndarray, now: np.ndarray, milli: int) -> np.ndarray | float:
        """Added to the delta of putting a shared task of `milli` on devices with `was` free (`now` after):
        minus `nu` x the regret, so a task that completes a gap well wins over one that spoils it."""
        if self._prices is None:
            return 0.0
        penalty: np.ndarray = -self.nu * self._prices.regret(was, now, milli)
        return penalty

    def fragmentation(self, s: NodeStats, models: tuple[str, ...]) -> np.ndarray:
        base = super().fragmentation(s, models)
        if self.lam <= 0:
            return base
        usable = s.cpu_free / self.cpu_per_gpu_milli(models)[s.model_code + 1]
        measure: np.ndarray = base + self.lam * np.maximum(0.0, s.idle - usable)
        return measure


class ModelPressure:
    """Per GPU model, how much more than its share of the free GPU the restricted typical demand wants."""

    def __init__(self, tasks: Sequence[TypicalTask]) -> None:
        gpu = [t for t in tasks if t.gpu_count > 0]
        total = sum(t.weight * t.gpu_milli * t.gpu_count for t in gpu)
        self._restricted = [t for t in gpu if t.gpu_models]
        # Share of all typical GPU demand (milli-weighted) that each restricted task stands for.
        self._share = np.array(
            [t.weight * t.gpu_milli * t.gpu_count / total for t in self._restricted] if total > 0 else []
        )
        self._masks: dict[tuple[str, ...], np.ndarray] = {}
        self._free = FreeGpuByModel()

    @property
    def any_restricted(self) -> bool:
        return bool(self._restricted)

    def _mask(self, models: tuple[str, ...]) -> np.ndarray:
        """[restricted tasks, models] True where the task may use the model."""
        mask = self._masks.get(models)
        if mask is None:
            mask = np.array(
                [[m in t.gpu_models for m in models] for t in self._restricted], dtype=np.float64
            ).reshape(len(self._restricted), len(models))
            self._masks[models] = mask
        return mask

    def per_model(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """[model code] pressure, 0 where no restricted task may go."""
        models = snapshot.models
        if not self._restricted or not models:
            return np.zeros(len(models))
        free = self._free.totals(snapshot)
        total_free = free.sum()
        if total_free <= 0:
            return np.zeros(len(models))
        mask = self._mask(models)
        reachable = mask @ free  # free GPU milli each restricted task could use
        # Each restricted task's share of demand spread over its allowed models in proportion to their free
        # GPU; tasks with nothing free left drop out (they will fail wherever flexible tasks go).
        weight = np.divide(self._share, reachable, out=np.zeros_like(self._share), where=reachable > 0)
        wanted = (weight @ mask) * free
        supply = free / total_free
        pressure: np.ndarray = np.divide(wanted, supply, out=np.zeros_like(wanted), where=supply > 0)
        return pressure


class _Shared:
    """fgdb's delta cache (stranding-aware fragmentation) and model pressure."""

    def __init__(
        self, tasks: Sequence[TypicalTask], lam: float, mu: float, nu: float, states: StateTable
    ) -> None:
        self.deltas = PlacementDeltas(FragmentationTracker(StrandingModel(tasks, lam, nu), states))
        self.pressure = ModelPressure(tasks)
        self.mu = mu

    def pressured(self, request: TaskRequest) -> bool:
        """Whether the pressure term can be non-zero for `request`."""
        return self.mu > 0 and request.gpu_count > 0 and self.pressure.any_restricted

    def plain(self, request: TaskRequest) -> bool:
        """Whether `request`'s score is FGD's integer score of the delta itself (the one the delta cache
        keeps)."""
        return not self.pressured(request)

    def penalty(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray
    ) -> np.ndarray | float:
        """Milli-GPU subtracted from the delta of placing `request` on each of `rows`."""
        if not self.pressured(request):
            return 0.0
        pressure = self.pressure.per_model(snapshot)
        # Per model, then per row: the same products, without two passes over every row.
        bonus: np.ndarray = (self.mu * pressure * request.total_gpu_milli)[snapshot.model_code[rows]]
        return bonus


class FgdbScore:
    name = "fgdb"

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        if self._shared.plain(request):
            return self._shared.deltas.scores_for_rows(snapshot, request, rows)
        delta = self._shared.deltas.for_rows(snapshot, request, rows)
        return sigmoid_score(delta - self._shared.penalty(snapshot, request, rows))

    def row_local(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool:
        # The pressure term reads the free GPU of the whole cluster, which every GPU placement moves.
        return not self._shared.pressured(request)


class FgdbDevice:
    """On the chosen node: whole-device tasks take the lowest-index free devices; a shared task takes the
    first device with the best integer score of the same delta the node was scored with (FGD's rule)."""

    name = "fgdb"

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    def choose(
        self, snapshot: ClusterSnapshot, request: TaskRequest, node: int, rng: np.random.Generator
    ) -> Assignment:
        def pick_shared(options: np.ndarray) -> int:
            # The penalty depends on the node's model only, so it shifts every device alike; it is kept so
            # that the integer buckets are the ones the node score used.
            penalty = self._shared.penalty(snapshot, request, np.array([node]))
            delta = self._shared.deltas.per_device(snapshot, request, node)[options] - penalty
            return first_best_device(options, delta)

        return assign_devices(snapshot, request, node, pick_shared)


ARGS = {
    "lam": Arg((int, float), 2.0, check=lambda v: v >= 0, help="weight of stranded GPU milli (CPU balance)"),
    "mu": Arg((int, float), 0.25, check=lambda v: v >= 0, help="weight of GPU-model pressure"),
    "nu": Arg((int, float), 10.0, check=lambda v: v >= 0, help="weight of a shared task's pairing regret"),
}


def _shared(args: Mapping[str, Any], ctx: PluginContext) -> _Shared:
    # The score and device plugins each keep their own caches (the device plugin refreshes only when it
    # chooses a device, so its batches of changed nodes differ, and with them the last bit of its sums);
    # they share the table of node states, which only groups identical nodes.
    if not ctx.typical_tasks:
        raise ProfileError("plugin 'fgdb' needs a workload distribution (typical tasks)")
    return _Shared(
        ctx.typical_tasks, float(args["lam"]), float(args["mu"]), float(args["nu"]), ctx.node_states()
    )


SPECS = [
    PluginSpec(
        FgdbScore.name,
        ExtensionPoint.SCORE,
        lambda args, ctx: FgdbScore(_shared(args, ctx)),
        args=ARGS,
        help="FGD + CPU stranding + GPU-model pressure + shared-GPU pairing",
    ),
    PluginSpec(
        FgdbDevice.name,
        ExtensionPoint.DEVICES,
        lambda args, ctx: FgdbDevice(_shared(args, ctx)),
        args=ARGS,
        help="FGD device rule on fgdb's delta",
    ),
]
