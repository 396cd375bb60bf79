"""The models simulated probes draw from, built on the measured RTTs.

The measured tables themselves (traces/network/, median of the five windows per direction) are the
kernel's `suanli.resources.network`, shared with the scheduler's simulator. The tables give averages
only; jitter, loss and bandwidth are modelled from the RTT (docs/sensing.md, "Network model"): jitter a
share of the RTT with a floor, loss a small base probability rising with the RTT (a proxy for distance and
hops), bandwidth by scope, inter-region paths limited by a window over the RTT.
"""

from __future__ import annotations

from dataclasses import dataclass


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
