"""A `LinkMeasured` record checked into a `Probe`; a record that cannot be one is refused with the field.

Decoding (Avro) already guarantees the types; this checks what Avro cannot: names present, figures in
range. The processor dead-letters a refused record with this message as the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from suanli.clock import to_ms
from suanli.errors import InvalidArgument
from suanli.routing.domain.links import Probe


class InvalidProbe(InvalidArgument):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"LinkMeasured.{field}: {problem}")
        self.field = field


def _name(record: Mapping[str, Any], field: str) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise InvalidProbe(field, "is required")
    return value


def _figure(record: Mapping[str, Any], field: str, *, upper: float | None = None) -> float:
    value = record.get(field)
    if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidProbe(field, f"must be a finite number >= 0, got {value!r}")
    if upper is not None and value > upper:
        raise InvalidProbe(field, f"must be at most {upper:g}, got {value!r}")
    return float(value)


def probe_from_record(record: Mapping[str, Any], at_ms: int) -> Probe:
    """The probe round a decoded `LinkMeasured` reports; ``at_ms`` is its occurred_at in milliseconds."""
    src_site, dst_site = _name(record, "src_site"), _name(record, "dst_site")
    if src_site == dst_site:
        raise InvalidProbe("dst_site", f"equals src_site {src_site!r}: a path needs two ends")
    bandwidth = record.get("bandwidth_mbps")
    samples = record.get("samples", 1)
    if not isinstance(samples, int) or samples < 1:
        raise InvalidProbe("samples", f"must be at least 1, got {samples!r}")
    return Probe(
        src_region=_name(record, "src_region"),
        src_site=src_site,
        dst_region=_name(record, "dst_region"),
        dst_site=dst_site,
        rtt_ms=_figure(record, "rtt_ms"),
        jitter_ms=_figure(record, "jitter_ms"),
        loss_ratio=_figure(record, "loss_ratio", upper=1.0),
        bandwidth_mbps=None if bandwidth is None else _figure(record, "bandwidth_mbps"),
        samples=samples,
        at_ms=at_ms,
    )


def occurred_ms(value: object) -> int:
    """occurred_at as decoded (an aware datetime) in epoch milliseconds (`suanli.clock.to_ms`)."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidProbe("occurred_at", f"must be an aware timestamp, got {value!r}")
    return to_ms(value)
