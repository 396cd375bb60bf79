"""Capacity per region and per GPU model, over the nodes that are live; what the metering gauges show."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from suanli.metering.domain.capacity import NodeCapacity
from suanli.metering.domain.liveness import NodeStatus
from suanli.metering.domain.usage import CPU_CLASS


@dataclass(frozen=True, slots=True)
class CuTotals:
    allocatable: float = 0.0
    used: float = 0.0

    def __add__(self, other: CuTotals) -> CuTotals:
        return CuTotals(self.allocatable + other.allocatable, self.used + other.used)

    @property
    def utilisation(self) -> float:
        return self.used / self.allocatable if self.allocatable else 0.0


@dataclass(frozen=True, slots=True)
class Summary:
    by_region_model: dict[tuple[str, str], CuTotals] = field(default_factory=dict)
    by_region: dict[str, CuTotals] = field(default_factory=dict)
    nodes: dict[tuple[str, NodeStatus], int] = field(default_factory=dict)


def summarise(nodes: Iterable[tuple[NodeCapacity, NodeStatus]]) -> Summary:
    """Sums CU of Ready nodes by (region, device class, with 'cpu' for host cores) and by region.

    Lost nodes are counted under their status but contribute no capacity: nothing can be placed on them.
    """
    by_model: dict[tuple[str, str], CuTotals] = {}
    by_region: dict[str, CuTotals] = {}
    counts: dict[tuple[str, NodeStatus], int] = {}
    for cap, status in nodes:
        counts[(cap.region, status)] = counts.get((cap.region, status), 0) + 1
        if status is not NodeStatus.READY:
            continue
        parts = [((cap.region, CPU_CLASS), CuTotals(cap.cpu_cu_allocatable, cap.cpu_cu_used))]
        parts += [
            ((cap.region, d.device_class), CuTotals(d.cu if d.healthy else 0.0, d.cu_allocated))
            for d in cap.devices
        ]
        for key, totals in parts:
            by_model[key] = by_model.get(key, CuTotals()) + totals
            by_region[cap.region] = by_region.get(cap.region, CuTotals()) + totals
    return Summary(by_model, by_region, counts)
