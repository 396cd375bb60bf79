"""What a collector saw on a node at one instant: plain frozen values, no I/O.

A metric the hardware does not report is ``None`` rather than 0, so the difference between "idle" and
"unknown" survives up to the snapshot builder, which decides how each event field spells "unknown".
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    pid: int
    gpu_memory_used_mib: int | None = None


@dataclass(frozen=True, slots=True)
class MigInstance:
    gpu_instance_id: int
    compute_instance_id: int
    uuid: str
    profile: str
    memory_total_mib: int


@dataclass(frozen=True, slots=True)
class DeviceObservation:
    index: int
    uuid: str
    model: str
    memory_total_mib: int
    memory_used_mib: int | None = None
    utilisation_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    processes: tuple[ProcessUsage, ...] = ()
    # None: MIG disabled or not supported; a tuple (possibly empty) when MIG mode is on.
    mig_instances: tuple[MigInstance, ...] | None = None


@dataclass(frozen=True, slots=True)
class HostObservation:
    cpu_cores: int
    cpu_utilisation_pct: float
    memory_total_mib: int
    memory_used_mib: int


@dataclass(frozen=True, slots=True)
class NodeObservation:
    host: HostObservation
    devices: tuple[DeviceObservation, ...] = ()
    # Why there are no devices when a GPU collector was wanted (NVML missing, ...); None when all is well.
    degraded_reason: str | None = None

    def with_devices(
        self, devices: tuple[DeviceObservation, ...], degraded_reason: str | None = None
    ) -> NodeObservation:
        return replace(self, devices=devices, degraded_reason=degraded_reason)
