"""NVIDIA devices through NVML (``nvidia-ml-py``'s ``pynvml`` module).

The module is a constructor argument so unit tests can hand in a fake at this hardware boundary. Every
metric is read on its own: a board that does not report power or temperature (NVMLError_NotSupported,
common on vGPUs and older cards) yields ``None`` for that metric, never a failed snapshot. A machine with no
NVML library or driver gets an `NvmlUnavailable` value from `NvmlCollector.open`, not an exception.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from suanli.sensing.domain.observation import DeviceObservation, MigInstance, ProcessUsage

log = logging.getLogger(__name__)

T = TypeVar("T")
MIB = 1024 * 1024
_MIG_PROFILE = re.compile(r"MIG\s+(\S+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NvmlUnavailable:
    """Why there are no NVIDIA devices to report: the agent runs host-only and says this."""

    reason: str
    error: str

    def __str__(self) -> str:
        return self.reason


def _default_module() -> ModuleType:
    import pynvml

    module: ModuleType = pynvml  # untyped library: the module object itself is all we rely on
    return module


class NvmlCollector:
    """Reads every NVIDIA device on the host; one instance per process holds NVML initialised."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._error_class: type[BaseException] = getattr(nvml, "NVMLError", Exception)
        self._warned: set[str] = set()

    @classmethod
    def open(cls, nvml: Any | None = None) -> NvmlCollector | NvmlUnavailable:
        """Initialise NVML; a missing library, driver or any init failure becomes `NvmlUnavailable`."""
        try:
            module = nvml if nvml is not None else _default_module()
        except ImportError as exc:
            return NvmlUnavailable("the pynvml module (nvidia-ml-py) is not installed", repr(exc))
        try:
            module.nvmlInit()
        except Exception as exc:  # NVMLError_* or OSError from the loader: all mean "no GPUs here"
            return NvmlUnavailable(_init_reason(module, exc), f"{type(exc).__name__}: {exc}")
        return cls(module)

    def close(self) -> None:
        self._read("shutdown", self._nvml.nvmlShutdown)

    def driver_version(self) -> str | None:
        return self._read("driver version", self._nvml.nvmlSystemGetDriverVersion)

    def devices(self) -> tuple[DeviceObservation, ...]:
        count = self._read("device count", self._nvml.nvmlDeviceGetCount) or 0
        found: list[DeviceObservation] = []
        for index in range(count):
            handle = self._read(f"device {index} handle", self._nvml.nvmlDeviceGetHandleByIndex, index)
            if handle is None:
                continue
            found.append(self._device(index, handle))
        return tuple(found)

    def _device(self, index: int, handle: Any) -> DeviceObservation:
        nvml = self._nvml
        memory = self._read("memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        rates = self._read("utilisation", nvml.nvmlDeviceGetUtilizationRates, handle)
        temperature = self._read(
            "temperature", nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        )
        power_mw = self._read("power", nvml.nvmlDeviceGetPowerUsage, handle)
        return DeviceObservation(
            index=index,
            uuid=_text(self._read("uuid", nvml.nvmlDeviceGetUUID, handle)) or f"nvml-index-{index}",
            model=_text(self._read("name", nvml.nvmlDeviceGetName, handle)) or "unknown",
            memory_total_mib=int(memory.total) // MIB if memory is not None else 0,
            memory_used_mib=int(memory.used) // MIB if memory is not None else None,
            utilisation_pct=float(rates.gpu) if rates is not None else None,
            temperature_c=float(temperature) if temperature is not None else None,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            processes=self._processes(handle),
            mig_instances=self._mig_instances(handle),
        )

    def _processes(self, handle: Any) -> tuple[ProcessUsage, ...]:
        procs = self._read("processes", self._nvml.nvmlDeviceGetComputeRunningProcesses, handle) or ()
        # usedGpuMemory is None where the driver cannot tell (Windows WDDM, some containers).
        return tuple(
            ProcessUsage(
                int(p.pid), int(p.usedGpuMemory) // MIB if getattr(p, "usedGpuMemory", None) else None
            )
            for p in procs
        )

    def _mig_instances(self, handle: Any) -> tuple[MigInstance, ...] | None:
        nvml = self._nvml
        mode = self._read("MIG mode", nvml.nvmlDeviceGetMigMode, handle)
        enabled = getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)
        if mode is None or mode[0] != enabled:
            return None
        slots = self._read("MIG slots", nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
        instances: list[MigInstance] = []
        for slot in range(slots):
            # An empty slot answers NotFound; that is the normal case, so it is not worth a warning.
            mig = self._read(None, nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
            if mig is None:
                continue
            memory = self._read("MIG memory", nvml.nvmlDeviceGetMemoryInfo, mig)
            name = _text(self._read("MIG name", nvml.nvmlDeviceGetName, mig)) or ""
            profile = _MIG_PROFILE.search(name)
            instances.append(
                MigInstance(
                    gpu_instance_id=self._read("GPU instance id", nvml.nvmlDeviceGetGpuInstanceId, mig) or 0,
                    compute_instance_id=self._read(
                        "compute instance id", nvml.nvmlDeviceGetComputeInstanceId, mig
                    )
                    or 0,
                    uuid=_text(self._read("MIG uuid", nvml.nvmlDeviceGetUUID, mig)) or f"mig-{slot}",
                    profile=profile.group(1) if profile else "unknown",
                    memory_total_mib=int(memory.total) // MIB if memory is not None else 0,
                )
            )
        return tuple(instances)

    def _read(self, what: str | None, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``, or None when NVML says it cannot (logged once per metric)."""
        try:
            return fn(*args)
        except self._error_class as exc:
            if what is not None and what not in self._warned:
                self._warned.add(what)
                log.info("NVML: %s not available: %s", what, exc)
            return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _init_reason(module: Any, exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "NVMLError_LibraryNotFound" or isinstance(exc, OSError):
        return "NVML library (libnvidia-ml.so) not found: no NVIDIA driver installed on this host"
    if name == "NVMLError_DriverNotLoaded":
        return "NVIDIA driver not loaded (no GPU, or the kernel module is not running)"
    if name == "NVMLError_NoPermission":
        return "no permission to open the NVIDIA devices (/dev/nvidia*)"
    if name == "NVMLError_LibRmVersionMismatch":
        return "NVML library and kernel driver versions differ (driver upgraded without reboot?)"
    return f"NVML initialisation failed: {name}: {exc}"
