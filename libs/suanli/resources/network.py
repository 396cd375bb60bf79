"""The measured network between regions and zones (traces/network/): the tables and their median model.

The tables are IBM Cloud's published VPC latency averages (traces/network/README.md). A region pair's RTT
is the median of the five 30-day windows for that direction (directional, as published): every window
counts, and one unusual month moves it less than it would move a mean or the latest value. A zone pair's
RTT inside a region is the zones table's value (one window). Ids are the published names in lower case with
spaces as hyphens (`Washington DC` -> `washington-dc`, zone `Dallas 1` -> `dallas-1`), so they can be
written in YAML and on a command line; the published name stays as the region's display name.

One model for every reader: sensing seeds simulated fleets' probes with it, the scheduler's simulator and
benchmarks build their network snapshot from it. `parse_measured_network` is pure (CSV text in, model
out); `measured_network` reads the packaged copies through `suanli.data.data_path`.
"""

from __future__ import annotations

import csv
import functools
import io
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from suanli.data import data_path

REGIONS_CSV = "traces/network/regions_rtt.csv"
ZONES_CSV = "traces/network/zones_rtt.csv"


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
        """Every region id of the tables, sorted."""
        return tuple(sorted(self.display_names))

    def zones_of(self, region: str) -> tuple[str, ...]:
        """The zone ids of one region, sorted (empty for a region the zones table lacks)."""
        return tuple(sorted(z for z, r in self.zone_regions.items() if r == region))

    def region_rtt(self, src: str, dst: str) -> float | None:
        """The median RTT from `src` to `dst` in ms; None for a pair the table lacks (or `src` == `dst`)."""
        return self.region_rtt_ms.get((src, dst))

    def zone_rtt(self, src_zone: str, dst_zone: str) -> float | None:
        """The RTT between two zones of one region in ms; None for a pair the table lacks."""
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


def read_measured_network(regions_text: str | None = None, zones_text: str | None = None) -> MeasuredNetwork:
    """The tables from the given CSV text, or from the packaged copies for what is not given.

    `NetworkDataError` names a file that cannot be read.
    """
    texts = []
    for relative, given in ((REGIONS_CSV, regions_text), (ZONES_CSV, zones_text)):
        if given is not None:
            texts.append(given)
            continue
        try:
            texts.append(data_path(relative).read_text(encoding="utf-8"))
        except OSError as exc:
            raise NetworkDataError(f"{relative}: {exc}") from exc
    return parse_measured_network(*texts)


@functools.cache
def measured_network() -> MeasuredNetwork:
    """The packaged IBM Cloud VPC tables (traces/network/README.md), parsed once per process."""
    return read_measured_network()
