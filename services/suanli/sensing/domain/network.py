"""The measured network between regions and zones (traces/network/), and the models built on its RTTs.

The tables are IBM Cloud's published VPC latency averages (traces/network/README.md). A region pair's RTT
is the median of the five 30-day windows for that direction (directional, as published): every window
counts, and one unusual month moves it less than it would move a mean or the latest value. A zone pair's
RTT inside a region is the zones table's value (one window). Ids are the published names in lower case with
spaces as hyphens (`Washington DC` -> `washington-dc`, zone `Dallas 1` -> `dallas-1`), so they can be
written in YAML and on a command line; the published name stays as the region's display name.

The tables give averages only; jitter, loss and bandwidth are modelled from the RTT (docs/sensing.md,
"Network model"): jitter a share of the RTT with a floor, loss a small base probability rising with the
RTT (a proxy for distance and hops), bandwidth by scope, inter-region paths limited by a window over the RTT.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass


class NetworkDataError(ValueError):
    """A latency table that cannot be read; the message names the row."""


def region_id(name: str) -> str:
    """The id form of a published region or zone name: ``Sao Paulo`` -> ``sao-paulo``."""
    return "-".join(name.lower().split())


@dataclass(frozen=True, slots=True)
class MeasuredNetwork:
    """Measured RTTs: directional region pairs and zone pairs inside each region, by id."""

    display_names: Mapping[str, str]  # region id -> name as published
    region_rtt_ms: Mapping[tuple[str, str], float]  # (source region, destination region)
    zone_rtt_ms: Mapping[tuple[str, str], float]  # (source zone, destination zone), same region
    zone_regions: Mapping[str, str]  # zone id -> region id

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(sorted(self.display_names))

    def region_rtt(self, src: str, dst: str) -> float | None:
        return self.region_rtt_ms.get((src, dst))

    def zone_rtt(self, src_zone: str, dst_zone: str) -> float | None:
        return self.zone_rtt_ms.get((src_zone, dst_zone))


def parse_measured_network(regions_csv: str, zones_csv: str) -> MeasuredNetwork:
    """Both tables from their CSV text (columns as in traces/network/README.md)."""
    by_pair: dict[tuple[str, str], list[float]] = defaultdict(list)
    names: dict[str, str] = {}
    for line, row in _rows(regions_csv, ("src_region", "dst_region", "rtt_ms_avg")):
        src, dst = row["src_region"], row["dst_region"]
        names[region_id(src)] = src
        names[region_id(dst)] = dst
        by_pair[(region_id(src), region_id(dst))].append(_rtt(row, line))
    zones: dict[tuple[str, str], float] = {}
    zone_regions: dict[str, str] = {}
    for line, row in _rows(zones_csv, ("region", "src_zone", "dst_zone", "rtt_ms_avg")):
        region = region_id(row["region"])
        src, dst = region_id(row["src_zone"]), region_id(row["dst_zone"])
        zone_regions[src] = zone_regions[dst] = region
        zones[(src, dst)] = _rtt(row, line)
    return MeasuredNetwork(
        display_names=names,
        region_rtt_ms={pair: statistics.median(values) for pair, values in by_pair.items()},
        zone_rtt_ms=zones,
        zone_regions=zone_regions,
    )


def _rows(text: str, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in columns if c not in (reader.fieldnames or ())]
    if missing:
        raise NetworkDataError(f"latency table lacks columns {missing}")
    rows = [(n, row) for n, row in enumerate(reader, start=2)]
    if not rows:
        raise NetworkDataError("latency table has no rows")
    return rows


def _rtt(row: Mapping[str, str], line: int) -> float:
    try:
        value = float(row["rtt_ms_avg"])
    except (TypeError, ValueError):
        raise NetworkDataError(f"line {line}: rtt_ms_avg {row['rtt_ms_avg']!r} is not a number") from None
    if value < 0:
        raise NetworkDataError(f"line {line}: rtt_ms_avg {value} is negative")
    return value


@dataclass(frozen=True, slots=True)
class JitterModel:
    """A probe's RTT varies around the mean with this standard deviation: ``max(floor, ratio * rtt)``.

    Queueing on a path grows with the number of hops, hence with distance; 2 % of the RTT gives 1-4 ms on
    intercontinental paths and the floor keeps a data-centre path from looking perfectly steady. (The
    jitter a probe round reports, RFC 3550's mean absolute difference of consecutive RTTs, is 2/sqrt(pi),
    about 1.13 times this standard deviation.)
    """

    ratio: float = 0.02
    floor_ms: float = 0.02

    def __post_init__(self) -> None:
        if self.ratio < 0 or self.floor_ms < 0:
            raise ValueError(f"bad jitter model {self}")

    def jitter_ms(self, rtt_ms: float) -> float:
        return max(self.floor_ms, self.ratio * rtt_ms)


@dataclass(frozen=True, slots=True)
class LossModel:
    """Probability a probe is lost: ``min(max_ratio, base + per_ms * rtt)``.

    Long paths cross more routers and peering points; 1e-4 plus 1e-5 per ms gives 0.01 % inside a region
    and about 0.2 % on a 200 ms path, the range public WAN measurements report for healthy cloud backbones.
    """

    base: float = 0.0001
    per_ms: float = 0.00001
    max_ratio: float = 0.01

    def __post_init__(self) -> None:
        if self.base < 0 or self.per_ms < 0 or not 0 <= self.max_ratio <= 1:
            raise ValueError(f"bad loss model {self}")

    def loss_ratio(self, rtt_ms: float) -> float:
        return min(self.max_ratio, self.base + self.per_ms * rtt_ms)


@dataclass(frozen=True, slots=True)
class BandwidthModel:
    """Available bandwidth by scope, in Mbit/s; an inter-region path is also limited by ``window_mbit``
    over the RTT (what a bulk transfer with that much data in flight can reach: 400 Mbit, 50 MB, gives
    4 Gbit/s at 100 ms). A round's figure is drawn between 90 % and 100 % of it."""

    intra_zone_mbps: float = 100_000.0
    intra_region_mbps: float = 25_000.0
    inter_region_mbps: float = 10_000.0
    window_mbit: float = 400.0

    def __post_init__(self) -> None:
        if min(self.intra_zone_mbps, self.intra_region_mbps, self.inter_region_mbps, self.window_mbit) <= 0:
            raise ValueError(f"bad bandwidth model {self}")

    def inter_region(self, rtt_ms: float) -> float:
        if rtt_ms <= 0:
            return self.inter_region_mbps
        return min(self.inter_region_mbps, self.window_mbit * 1000.0 / rtt_ms)
