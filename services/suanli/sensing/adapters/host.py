"""The host (CPU and memory) through psutil, and a node collector joining it with a device collector."""

from __future__ import annotations

from typing import Any

import psutil

from suanli.sensing.domain.observation import HostObservation, NodeObservation
from suanli.sensing.service_layer.ports import DeviceCollector

MIB = 1024 * 1024


class HostCollector:
    """Host figures; a node with no accelerators is fully described by this collector alone."""

    def __init__(self, ps: Any = psutil) -> None:
        self._ps = ps
        # The first cpu_percent(None) call has no previous sample and returns 0.0; prime it now so the
        # first report already shows the utilisation since the agent started.
        self._ps.cpu_percent(interval=None)

    def host(self) -> HostObservation:
        memory = self._ps.virtual_memory()
        return HostObservation(
            cpu_cores=self._ps.cpu_count(logical=True) or 1,
            cpu_utilisation_pct=float(self._ps.cpu_percent(interval=None)),
            memory_total_mib=int(memory.total) // MIB,
            memory_used_mib=int(memory.total - memory.available) // MIB,
        )

    def collect(self) -> NodeObservation:
        return NodeObservation(host=self.host())


class NodeCollector:
    """Host plus devices; ``gpu_missing`` says why there is no device collector (NVML unavailable)."""

    def __init__(
        self, host: HostCollector, devices: DeviceCollector | None, *, gpu_missing: str | None = None
    ) -> None:
        self._host = host
        self._devices = devices
        self._gpu_missing = gpu_missing

    def collect(self) -> NodeObservation:
        host = self._host.host()
        if self._devices is None:
            return NodeObservation(host=host, degraded_reason=self._gpu_missing)
        return NodeObservation(host=host, devices=self._devices.devices())
