"""The measured latency tables shipped in traces/network/ (package data), parsed once per process."""

from __future__ import annotations

import functools

from suanli.data import data_path
from suanli.sensing.domain.network import MeasuredNetwork, NetworkDataError, parse_measured_network

REGIONS_CSV = "traces/network/regions_rtt.csv"
ZONES_CSV = "traces/network/zones_rtt.csv"


@functools.cache
def measured_network() -> MeasuredNetwork:
    """The IBM Cloud VPC tables (traces/network/README.md); `NetworkDataError` names a bad file."""
    texts = []
    for relative in (REGIONS_CSV, ZONES_CSV):
        try:
            texts.append(data_path(relative).read_text(encoding="utf-8"))
        except OSError as exc:
            raise NetworkDataError(f"{relative}: {exc}") from exc
    return parse_measured_network(*texts)
