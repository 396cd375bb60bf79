"""NVML collector against a fake pynvml module (the hardware boundary), and the real one without a GPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from suanli.sensing.adapters.nvml import NvmlCollector, NvmlUnavailable
from suanli.sensing.domain.observation import MigInstance, ProcessUsage

MIB = 1024 * 1024


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_NotFound(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


@dataclass
class FakeDevice:
    name: str
    uuid: str
    total_mib: int
    used_mib: int = 0
    util: int = 0
    temperature: int = 40
    power_mw: int | None = 100_000
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    mig: list[FakeDevice] | None = None
    gi: int = 0
    ci: int = 0
    unsupported: set[str] = field(default_factory=set)


class FakeNvml:
    """Just enough of pynvml: handles are FakeDevice objects; ``unsupported`` metrics raise NotSupported."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_DEVICE_MIG_ENABLE = 1

    def __init__(self, devices: list[FakeDevice], init_error: Exception | None = None) -> None:
        self._devices = devices
        self._init_error = init_error
        self.initialised = False

    def _check(self, device: FakeDevice, metric: str) -> None:
        if metric in device.unsupported:
            raise NVMLError_NotSupported(metric)

    def nvmlInit(self) -> None:
        if self._init_error is not None:
            raise self._init_error
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        return self._devices[index]

    def nvmlDeviceGetName(self, d: FakeDevice) -> bytes:
        return d.name.encode()  # older pynvml returns bytes

    def nvmlDeviceGetUUID(self, d: FakeDevice) -> str:
        return d.uuid

    def nvmlDeviceGetMemoryInfo(self, d: FakeDevice) -> Any:
        self._check(d, "memory")
        return SimpleNamespace(total=d.total_mib * MIB, used=d.used_mib * MIB, free=0)

    def nvmlDeviceGetUtilizationRates(self, d: FakeDevice) -> Any:
        self._check(d, "utilisation")
        return SimpleNamespace(gpu=d.util, memory=0)

    def nvmlDeviceGetTemperature(self, d: FakeDevice, sensor: int) -> int:
        self._check(d, "temperature")
        return d.temperature

    def nvmlDeviceGetPowerUsage(self, d: FakeDevice) -> int:
        self._check(d, "power")
        assert d.power_mw is not None
        return d.power_mw

    def nvmlDeviceGetComputeRunningProcesses(self, d: FakeDevice) -> list[Any]:
        self._check(d, "processes")
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * MIB)
            for pid, mib in d.processes
        ]

    def nvmlDeviceGetMigMode(self, d: FakeDevice) -> list[int]:
        if d.mig is None:
            raise NVMLError_NotSupported("mig")
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, d: FakeDevice) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, d: FakeDevice, slot: int) -> FakeDevice:
        assert d.mig is not None
        if slot >= len(d.mig):
            raise NVMLError_NotFound(slot)
        return d.mig[slot]

    def nvmlDeviceGetGpuInstanceId(self, d: FakeDevice) -> int:
        return d.gi

    def nvmlDeviceGetComputeInstanceId(self, d: FakeDevice) -> int:
        return d.ci


def _open(fake: FakeNvml) -> NvmlCollector:
    collector = NvmlCollector.open(fake)
    assert isinstance(collector, NvmlCollector), collector
    return collector


def test_reads_every_metric_of_every_device() -> None:
    fake = FakeNvml(
        [
            FakeDevice(
                "NVIDIA H200",
                "GPU-aaa",
                143771,
                used_mib=20480,
                util=87,
                temperature=61,
                power_mw=512_345,
                processes=[(4242, 20000), (4343, None)],
            ),
            FakeDevice("NVIDIA H200", "GPU-bbb", 143771),
        ]
    )
    devices = _open(fake).devices()
    assert [d.index for d in devices] == [0, 1]
    first = devices[0]
    assert (first.uuid, first.model, first.memory_total_mib, first.memory_used_mib) == (
        "GPU-aaa",
        "NVIDIA H200",
        143771,
        20480,
    )
    assert first.utilisation_pct == 87.0 and first.temperature_c == 61.0
    assert first.power_w == pytest.approx(512.345)
    assert first.processes == (ProcessUsage(4242, 20000), ProcessUsage(4343, None))
    assert first.mig_instances is None


def test_unsupported_metrics_become_none_not_a_crash() -> None:
    board = FakeDevice(
        "Tesla T4", "GPU-ccc", 15360, unsupported={"power", "temperature", "utilisation", "processes"}
    )
    (device,) = _open(FakeNvml([board])).devices()
    assert device.power_w is None and device.temperature_c is None and device.utilisation_pct is None
    assert device.processes == ()
    assert device.memory_total_mib == 15360  # what is supported is still read


def test_mig_instances_are_listed_when_mig_is_enabled() -> None:
    slices = [
        FakeDevice("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "MIG-1", 19968, gi=1, ci=0),
        FakeDevice("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "MIG-2", 4864, gi=7, ci=0),
    ]
    parent = FakeDevice("NVIDIA A100-SXM4-40GB", "GPU-ddd", 40960, mig=slices)
    (device,) = _open(FakeNvml([parent])).devices()
    assert device.mig_instances == (
        MigInstance(1, 0, "MIG-1", "3g.20gb", 19968),
        MigInstance(7, 0, "MIG-2", "1g.5gb", 4864),
    )


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (NVMLError_LibraryNotFound(), "library"),
        (NVMLError_DriverNotLoaded(), "driver not loaded"),
        (OSError("libnvidia-ml.so.1: cannot open shared object file"), "library"),
        (NVMLError("Unknown Error"), "initialisation failed"),
    ],
)
def test_init_failures_are_a_typed_reason(error: Exception, reason: str) -> None:
    result = NvmlCollector.open(FakeNvml([], init_error=error))
    assert isinstance(result, NvmlUnavailable)
    assert reason in result.reason.lower()
    assert type(error).__name__ in result.error


def test_real_pynvml_without_a_gpu_reports_unavailable() -> None:
    result = NvmlCollector.open()
    if isinstance(result, NvmlCollector):  # a machine with a GPU: the collector must read it
        try:
            assert all(d.model for d in result.devices())
        finally:
            result.close()
        return
    assert isinstance(result, NvmlUnavailable) and result.reason
