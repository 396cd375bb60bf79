"""Usage windows: allocation x time, split at minute boundaries, computed only from event timestamps.

Integer amounts (milli-seconds of GPU share and of CPU) are taken as differences of one cumulative
function of the time since the attempt started, floored to whole units. Each window is therefore
reproducible on its own, and the windows of an attempt always add up to exactly the floored total
(allocation x duration), however the time is split.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from suanli.metering.domain.ids import derived_id

WINDOW_MS: Final = 60_000
CPU_CLASS: Final = "cpu"


@dataclass(frozen=True, slots=True)
class RatedShare:
    """A share of one device with the CU it is worth."""

    index: int
    milli: int
    device_class: str
    cu: float  # CU of this share, not of the whole device


@dataclass(frozen=True, slots=True)
class Allocation:
    node_id: str
    devices: tuple[RatedShare, ...]
    cpu_milli: int
    cpu_cu: float

    @property
    def gpu_milli(self) -> int:
        return sum(d.milli for d in self.devices)

    def cu_by_class(self) -> dict[str, float]:
        rates: dict[str, float] = {}
        for d in self.devices:
            rates[d.device_class] = rates.get(d.device_class, 0.0) + d.cu
        if self.cpu_cu:
            rates[CPU_CLASS] = rates.get(CPU_CLASS, 0.0) + self.cpu_cu
        return rates


@dataclass(frozen=True, slots=True)
class Charge:
    """Who a window is charged to."""

    task_id: str
    attempt: int
    job_id: str
    tenant: str
    queue: str


@dataclass(frozen=True, slots=True)
class UsageWindow:
    charge: Charge
    node_id: str
    start_ms: int
    end_ms: int
    cu_seconds: MappingProxyType[str, float]
    gpu_milli_seconds: int
    cpu_milli_seconds: int
    # Actual over allocated use in this window, from UsageSampled; reported beside, never charged.
    efficiency: float | None = None
    # The attempt's trace context (its TaskStarted's), opaque here: whatever fact closes the window, the
    # entrypoint publishes it in the job's trace.
    trace_context: str = ""

    @property
    def event_id(self) -> str:
        # Keyed by attempt and window start: a re-emitted window carries the id it had the first time.
        return derived_id("usage", self.charge.task_id, self.charge.attempt, self.start_ms)

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms


def window_start(t_ms: int, width_ms: int = WINDOW_MS) -> int:
    return t_ms - t_ms % width_ms


def split(start_ms: int, end_ms: int, width_ms: int = WINDOW_MS) -> list[tuple[int, int]]:
    """``[start, end)`` cut at every multiple of ``width_ms`` (UTC minute boundaries by default)."""
    bounds = []
    at = start_ms
    while at < end_ms:
        nxt = min(end_ms, window_start(at, width_ms) + width_ms)
        bounds.append((at, nxt))
        at = nxt
    return bounds


def _between(milli: int, from_elapsed_ms: int, to_elapsed_ms: int) -> int:
    # milli x ms / 1000 = milli-seconds. Differences of one floored running total telescope, so the
    # windows of an attempt add up to exactly floor(milli x duration / 1000).
    return milli * to_elapsed_ms // 1000 - milli * from_elapsed_ms // 1000


def windows(
    charge: Charge,
    allocation: Allocation,
    *,
    started_ms: int,
    from_ms: int,
    to_ms: int,
    efficiency: dict[int, float] | None = None,
    width_ms: int = WINDOW_MS,
    trace_context: str = "",
) -> list[UsageWindow]:
    """Windows over ``[from_ms, to_ms)`` of an attempt holding its resources since ``started_ms``."""
    rates = allocation.cu_by_class()
    gpu_milli = allocation.gpu_milli
    out = []
    for a, b in split(from_ms, to_ms, width_ms):
        seconds = (b - a) / 1000
        out.append(
            UsageWindow(
                charge=charge,
                node_id=allocation.node_id,
                start_ms=a,
                end_ms=b,
                cu_seconds=MappingProxyType({cls: cu * seconds for cls, cu in sorted(rates.items())}),
                gpu_milli_seconds=_between(gpu_milli, a - started_ms, b - started_ms),
                cpu_milli_seconds=_between(allocation.cpu_milli, a - started_ms, b - started_ms),
                efficiency=(efficiency or {}).get(window_start(a, width_ms)),
                trace_context=trace_context,
            )
        )
    return out
