"""Network paths between sites: a summary of real probe rounds, and a model for simulated fleets whose
probes are drawn from the injected, fleet-seeded `KeyedRandom`.

Jitter is the mean absolute difference of consecutive round-trip times (RFC 3550's definition, unsmoothed),
so a real probe round and the model report the same quantity.

A path's expected behaviour (`LinkModel.profile`) comes, in this order, from an explicit region pair of the
fleet file; the measured tables (suanli.resources.network) for a region pair or a zone pair they know,
with jitter, loss and bandwidth modelled on the RTT; a small same-zone RTT for two sites in one zone; else
the fleet file's scope profiles (``intra_region``, ``inter_region``), for regions the tables do not have.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from suanli.resources.network import MeasuredNetwork
from suanli.sensing.domain.network import BandwidthModel, JitterModel, LossModel
from suanli.sensing.domain.randomness import KeyedRandom


@dataclass(frozen=True, slots=True)
class SiteRef:
    region: str
    site: str
    # Where the site is inside its region; not part of its identity (a peer given as region/site has none).
    zone: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class LinkSample:
    src_region: str
    src_site: str
    dst_region: str
    dst_site: str
    rtt_ms: float
    jitter_ms: float
    loss_ratio: float
    samples: int
    bandwidth_mbps: float | None = None

    @property
    def link_id(self) -> str:
        return f"{self.src_site}->{self.dst_site}"


def summarise(src: SiteRef, dst: SiteRef, rtts_ms: Sequence[float | None]) -> LinkSample:
    """One sample from a round of probes; ``None`` is a lost probe. All lost: rtt and jitter are 0, loss 1."""
    if not rtts_ms:
        raise ValueError("a probe round needs at least one probe")
    ok = [r for r in rtts_ms if r is not None]
    jitter = sum(abs(b - a) for a, b in itertools.pairwise(ok)) / (len(ok) - 1) if len(ok) > 1 else 0.0
    return LinkSample(
        src.region,
        src.site,
        dst.region,
        dst.site,
        rtt_ms=sum(ok) / len(ok) if ok else 0.0,
        jitter_ms=jitter,
        loss_ratio=(len(rtts_ms) - len(ok)) / len(rtts_ms),
        samples=len(rtts_ms),
    )


@dataclass(frozen=True, slots=True)
class LinkProfile:
    """Expected behaviour of a path: mean RTT, jitter, loss probability, bandwidth."""

    rtt_ms: float
    jitter_ms: float = 0.0
    loss_ratio: float = 0.0
    bandwidth_mbps: float | None = None

    def __post_init__(self) -> None:
        if self.rtt_ms < 0 or self.jitter_ms < 0 or not 0 <= self.loss_ratio <= 1:
            raise ValueError(f"bad link profile {self}")


# Adjusts a path's profile before a round is drawn (the scripted faults in force: domain.faults).
ProfileAdjust = Callable[[SiteRef, SiteRef, LinkProfile], LinkProfile]


@dataclass(frozen=True, slots=True)
class LinkModel:
    """Profiles of paths between sites; see the module docstring for where each comes from."""

    intra_site: LinkProfile = field(default_factory=lambda: LinkProfile(0.2, 0.02))
    intra_region: LinkProfile = field(default_factory=lambda: LinkProfile(1.5, 0.2, 0.0, 25_000.0))
    inter_region: LinkProfile = field(default_factory=lambda: LinkProfile(40.0, 3.0, 0.001, 10_000.0))
    region_pairs: Mapping[frozenset[str], LinkProfile] = field(default_factory=dict)
    probes_per_round: int = 10
    measured: MeasuredNetwork | None = None
    # Two sites of one zone: a data-centre campus, below the smallest published zone-to-zone RTT (0.63 ms).
    same_zone_rtt_ms: float = 0.5
    jitter: JitterModel = field(default_factory=JitterModel)
    loss: LossModel = field(default_factory=LossModel)
    bandwidth: BandwidthModel = field(default_factory=BandwidthModel)

    def __post_init__(self) -> None:
        if self.probes_per_round < 1:
            raise ValueError("probes_per_round must be >= 1")
        if self.same_zone_rtt_ms < 0:
            raise ValueError("same_zone_rtt_ms must be >= 0")

    def profile(self, src: SiteRef, dst: SiteRef) -> LinkProfile:
        if src == dst:
            return self.intra_site
        if src.region != dst.region:
            explicit = self.region_pairs.get(frozenset((src.region, dst.region)))
            if explicit is not None:
                return explicit
            rtt = None if self.measured is None else self.measured.region_rtt(src.region, dst.region)
            if rtt is None:
                return self.inter_region
            return self._modelled(rtt, self.bandwidth.inter_region(rtt))
        if src.zone and src.zone == dst.zone:
            return self._modelled(self.same_zone_rtt_ms, self.bandwidth.intra_zone_mbps)
        rtt = None if self.measured is None else self.measured.zone_rtt(src.zone, dst.zone)
        if rtt is None:
            return self.intra_region
        return self._modelled(rtt, self.bandwidth.intra_region_mbps)

    def _modelled(self, rtt_ms: float, bandwidth_mbps: float) -> LinkProfile:
        return LinkProfile(
            rtt_ms, self.jitter.jitter_ms(rtt_ms), self.loss.loss_ratio(rtt_ms), bandwidth_mbps
        )

    def sample(
        self,
        src: SiteRef,
        dst: SiteRef,
        round_no: int,
        rng: KeyedRandom,
        adjust: ProfileAdjust | None = None,
    ) -> LinkSample:
        """One probe round, the same for the same (seed, link, round, faults) on any machine."""
        profile = self.profile(src, dst)
        if adjust is not None:
            profile = adjust(src, dst, profile)
        draws = rng.draws(f"{src.site}|{dst.site}|{round_no}")
        rtts: list[float | None] = []
        for _ in range(self.probes_per_round):
            if draws.random() < profile.loss_ratio:
                rtts.append(None)
            else:
                rtts.append(max(0.01, draws.gauss(profile.rtt_ms, profile.jitter_ms)))
        sample = summarise(src, dst, rtts)
        bandwidth = None
        if profile.bandwidth_mbps is not None:
            bandwidth = profile.bandwidth_mbps * draws.uniform(0.9, 1.0)
        return replace(sample, bandwidth_mbps=bandwidth)

    def sample_all(
        self, sites: Iterable[SiteRef], round_no: int, rng: KeyedRandom, adjust: ProfileAdjust | None = None
    ) -> list[LinkSample]:
        """Every ordered pair of distinct sites, in a stable order."""
        ordered = sorted(set(sites), key=lambda s: (s.region, s.site))
        return [self.sample(a, b, round_no, rng, adjust) for a in ordered for b in ordered if a != b]
