"""Device choice inside the chosen node. Whole-device tasks always take the lowest-index free devices (all
fully free devices are alike); the policies differ in where a shared (fractional) task goes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.framework.registry import Arg, ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.plugins._common import assign_devices, first_best_device, plain
from suanli.scheduling.domain.plugins._fragmentation import PlacementDeltas
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot


class _DeviceChoice(ABC):
    name = ""

    def choose(
        self, snapshot: ClusterSnapshot, request: TaskRequest, node: int, rng: np.random.Generator
    ) -> Assignment:
        return assign_devices(
            snapshot, request, node, lambda options: self._shared(snapshot, request, node, options, rng)
        )

    @abstractmethod
    def _shared(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        node: int,
        options: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        """The device a shared task takes among `options` (devices of `node` where it fits)."""


class LowestIndex(_DeviceChoice):
    name = "lowest-index"

    def _shared(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        node: int,
        options: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        return int(options[0])


class BestFitDevice(_DeviceChoice):
    """The device with the least free milli that still fits: keeps whole devices whole."""

    name = "best-fit"

    def _shared(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        node: int,
        options: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        return int(options[np.argmin(snapshot.live().gpu_free[node, options])])


class RandomDevice(_DeviceChoice):
    name = "random"

    def _shared(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        node: int,
        options: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        return int(options[rng.integers(options.size)])


class FgdDevice(_DeviceChoice):
    """The device whose use grows the node's fragmentation least.

    `exact=False` reproduces the FGD paper: compare the integer sigmoid scores and keep the first best device.
    `exact=True` compares the fragmentation deltas themselves and breaks ties by best fit.
    """

    name = "fgd"

    def __init__(self, deltas: PlacementDeltas, exact: bool) -> None:
        self._deltas = deltas
        self._exact = exact

    def _shared(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        node: int,
        options: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        delta = self._deltas.per_device(snapshot, request, node)[options]
        if not self._exact:
            return first_best_device(options, delta)
        best = options[delta >= delta.max() - 1e-9]
        return int(best[np.argmin(snapshot.live().gpu_free[node, best])])


def _fgd_factory(args: Mapping[str, Any], ctx: PluginContext) -> FgdDevice:
    return FgdDevice(ctx.placement_deltas("fgd"), exact=args["exact"])


SPECS = [
    PluginSpec(
        LowestIndex.name, ExtensionPoint.DEVICES, plain(LowestIndex), help="lowest-index fitting device"
    ),
    PluginSpec(
        BestFitDevice.name, ExtensionPoint.DEVICES, plain(BestFitDevice), help="least free fitting device"
    ),
    PluginSpec(RandomDevice.name, ExtensionPoint.DEVICES, plain(RandomDevice), help="random fitting device"),
    PluginSpec(
        FgdDevice.name,
        ExtensionPoint.DEVICES,
        _fgd_factory,
        args={"exact": Arg((bool,), False, help="compare exact deltas instead of FGD's integer scores")},
        help="device that grows fragmentation least",
    ),
]
