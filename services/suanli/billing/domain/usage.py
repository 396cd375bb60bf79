"""What billing rates: one task's metered use over one window, and the job terms it is priced by."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType

from suanli import clock
from suanli.billing.domain.errors import InvalidUsage

# CU-seconds are carried as doubles on the wire; billing keeps them to the micro-CU-second.
CU_SECONDS_QUANTUM = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class Usage:
    event_id: str
    tenant: str
    job_id: str
    task_id: str
    node_id: str
    window_start: datetime
    window_end: datetime
    cu_seconds: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for name in ("event_id", "tenant", "job_id", "task_id", "node_id"):
            if not getattr(self, name):
                raise InvalidUsage(f"{name} must not be empty")
        if self.window_start.utcoffset() is None or self.window_end.utcoffset() is None:
            raise InvalidUsage("window bounds must be timezone-aware")
        if self.window_end <= self.window_start:
            raise InvalidUsage(
                f"window_end {self.window_end.isoformat()} is not after window_start "
                f"{self.window_start.isoformat()}"
            )
        for device_class, amount in self.cu_seconds.items():
            if not device_class:
                raise InvalidUsage("cu_seconds has an empty device class")
            if not amount.is_finite() or amount < 0:
                raise InvalidUsage(f"cu_seconds[{device_class!r}] must be finite and >= 0, got {amount}")

    @property
    def duration_ms(self) -> int:
        return clock.duration_ms(self.window_end - self.window_start)


@dataclass(frozen=True, slots=True)
class JobTerms:
    """What the job was submitted with that prices it (from JobSubmitted)."""

    priority: int
    preemptible: bool


def cu_seconds_from_float(value: float) -> Decimal:
    """The double's shortest decimal text, to the micro-CU-second (never the binary expansion)."""
    if not math.isfinite(value):
        raise InvalidUsage(f"cu_seconds must be finite, got {value!r}")
    return Decimal(repr(float(value))).quantize(CU_SECONDS_QUANTUM)
