"""The network as placement sees it: a region-pair matrix of RTT, bandwidth, loss, status and probe time.

Built from the routing service's region summaries (`NetworkLinkChanged`, scope 'region'); pure and
immutable, handed to each cycle. Links are measured in one direction (src -> dst); a path between two
regions reads the direction asked for and falls back to the reverse one, and takes the worse status of
the two. A region's path to itself is its own summary when routing publishes one, else 0 ms and OK: the
zones of one region are a few milliseconds apart.

Lookups for many nodes at once go by region code: `paths_to(data_region, snapshot.regions)` gives one
entry per region of a cluster snapshot, indexed by its `region_code` column.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from suanli.scheduling.domain.model import TaskRequest


class LinkStatus(IntEnum):
    """Ordered by how bad: the worse of two directions is the larger."""

    UNKNOWN = 0
    OK = 1
    DEGRADED = 2
    DOWN = 3


@dataclass(frozen=True, slots=True)
class RegionLink:
    """One direction between two regions, as the network view last published it."""

    src: str
    dst: str
    rtt_ms: float
    loss_ratio: float = 0.0
    bandwidth_mbps: float | None = None
    status: LinkStatus = LinkStatus.OK
    last_probe_ms: int = 0
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.src or not self.dst:
            raise ValueError("a link needs a source and a destination region")
        if not math.isfinite(self.rtt_ms) or self.rtt_ms < 0:
            raise ValueError(f"rtt_ms must be a finite number >= 0, got {self.rtt_ms}")
        if not 0.0 <= self.loss_ratio <= 1.0:
            raise ValueError(f"loss_ratio must be 0..1, got {self.loss_ratio}")
        if self.bandwidth_mbps is not None and not (
            math.isfinite(self.bandwidth_mbps) and self.bandwidth_mbps >= 0
        ):
            raise ValueError(f"bandwidth_mbps must be a finite number >= 0, got {self.bandwidth_mbps}")


@dataclass(frozen=True, slots=True)
class Paths:
    """Paths from each of some regions to one region, one entry per region asked about. `rtt_ms` and
    `bandwidth_mbps` are NaN where nothing was measured; `status` holds `LinkStatus` values."""

    rtt_ms: np.ndarray
    bandwidth_mbps: np.ndarray
    status: np.ndarray

    @property
    def down(self) -> np.ndarray:
        down: np.ndarray = self.status == LinkStatus.DOWN
        return down

    def within(self, max_rtt_ms: float) -> np.ndarray:
        """Where the RTT is measured, the link is up and the RTT is at most `max_rtt_ms`."""
        measured = ~np.isnan(self.rtt_ms) & (self.status >= LinkStatus.OK) & ~self.down
        ok: np.ndarray = measured & (np.nan_to_num(self.rtt_ms, nan=np.inf) <= max_rtt_ms)
        return ok


class NetworkSnapshot:
    """Region-pair matrices (row: from, column: to), one row and column per region the view knows."""

    __slots__ = (
        "_index",
        "bandwidth_mbps",
        "links",
        "loss_ratio",
        "probed_ms",
        "regions",
        "rtt_ms",
        "status",
    )

    regions: tuple[str, ...]
    links: int
    rtt_ms: np.ndarray
    bandwidth_mbps: np.ndarray
    loss_ratio: np.ndarray
    status: np.ndarray
    probed_ms: np.ndarray
    _index: dict[str, int]

    def __init__(self, links: Iterable[RegionLink] = ()) -> None:
        given = list(links)
        self.regions = tuple(sorted({r for link in given for r in (link.src, link.dst)}))
        self._index = {r: i for i, r in enumerate(self.regions)}
        n = len(self.regions)
        self.links = len(given)
        self.rtt_ms = np.full((n, n), np.nan)
        self.bandwidth_mbps = np.full((n, n), np.nan)
        self.loss_ratio = np.full((n, n), np.nan)
        self.status = np.zeros((n, n), dtype=np.int8)
        self.probed_ms = np.zeros((n, n), dtype=np.int64)
        for link in given:
            i, j = self._index[link.src], self._index[link.dst]
            self.rtt_ms[i, j] = link.rtt_ms
            self.bandwidth_mbps[i, j] = np.nan if link.bandwidth_mbps is None else link.bandwidth_mbps
            self.loss_ratio[i, j] = link.loss_ratio
            self.status[i, j] = int(link.status)
            self.probed_ms[i, j] = link.last_probe_ms
        for array in (self.rtt_ms, self.bandwidth_mbps, self.loss_ratio, self.status, self.probed_ms):
            array.flags.writeable = False

    @property
    def known(self) -> bool:
        """False before the first link arrived: no network constraint can be proven then."""
        return self.links > 0

    @property
    def last_probe_ms(self) -> int:
        """The newest probe behind the view (0 when empty)."""
        return int(self.probed_ms.max()) if self.links else 0

    def paths_to(self, target: str, regions: Sequence[str]) -> Paths:
        """The path from each of `regions` to `target` (vectorised: one entry per region)."""
        count = len(regions)
        rtt = np.full(count, np.nan)
        bandwidth = np.full(count, np.nan)
        status = np.zeros(count, dtype=np.int8)
        j = self._index.get(target)
        for k, region in enumerate(regions):
            i = self._index.get(region)
            if i is not None and j is not None:
                forward = self.status[i, j] != LinkStatus.UNKNOWN or not np.isnan(self.rtt_ms[i, j])
                a, b = (i, j) if forward else (j, i)
                rtt[k] = self.rtt_ms[a, b]
                bandwidth[k] = self.bandwidth_mbps[a, b]
                status[k] = max(self.status[i, j], self.status[j, i])
            if region == target and np.isnan(rtt[k]):
                rtt[k] = 0.0
                status[k] = max(int(status[k]), int(LinkStatus.OK))
        return Paths(rtt, bandwidth, status)

    def path(self, source: str, target: str) -> tuple[float | None, float | None, LinkStatus]:
        """RTT (ms), bandwidth (Mbit/s) and status of one path; None where nothing was measured."""
        p = self.paths_to(target, (source,))
        rtt, bandwidth = float(p.rtt_ms[0]), float(p.bandwidth_mbps[0])
        return (
            None if math.isnan(rtt) else rtt,
            None if math.isnan(bandwidth) else bandwidth,
            LinkStatus(int(p.status[0])),
        )


EMPTY_NETWORK = NetworkSnapshot()


NO_VIEW = "no network view yet"


def allowed_regions(network: NetworkSnapshot, request: TaskRequest, regions: Sequence[str]) -> np.ndarray:
    """Per region: True where the request's network constraint allows it (what `region_exclusions`
    says, as a mask, without composing the reasons)."""
    if not request.data_region:
        return np.ones(len(regions), dtype=bool)
    if request.max_rtt_ms is not None and not network.known:
        return np.zeros(len(regions), dtype=bool)
    paths = network.paths_to(request.data_region, regions)
    if request.max_rtt_ms is None:
        up: np.ndarray = ~paths.down
        return up
    return paths.within(request.max_rtt_ms)


def region_exclusions(
    network: NetworkSnapshot, request: TaskRequest, regions: Sequence[str]
) -> list[str | None]:
    """Per region: why the request's network constraint rules it out, or None where it is allowed."""
    if not request.data_region:
        return [None] * len(regions)
    if request.max_rtt_ms is not None and not network.known:
        return [NO_VIEW] * len(regions)
    paths = network.paths_to(request.data_region, regions)
    out: list[str | None] = []
    for k in range(len(regions)):
        rtt, status = float(paths.rtt_ms[k]), int(paths.status[k])
        if status == LinkStatus.DOWN:
            out.append(f"link to {request.data_region} is DOWN")
        elif request.max_rtt_ms is None:
            out.append(None)
        elif np.isnan(rtt) or status == LinkStatus.UNKNOWN:
            out.append(f"no RTT measured to {request.data_region}")
        elif rtt > request.max_rtt_ms:
            out.append(f"RTT {rtt:.1f} ms to {request.data_region} > max_rtt_ms {request.max_rtt_ms:g}")
        else:
            out.append(None)
    return out
