"""Network paths between sites: a summary of real probe rounds, and a model for simulated fleets whose
probes are drawn from the injected, fleet-seeded `KeyedRandom`.

Jitter is the mean absolute difference of consecutive round-trip times (RFC 3550's definition, unsmoothed),
so a real probe round and the model report the same quantity.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from suanli.sensing.domain.randomness import KeyedRandom


@dataclass(frozen=True, slots=True)
class SiteRef:
    region: str
    site: str


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


@dataclass(frozen=True, slots=True)
class LinkModel:
    """Profiles by scope: same site, same region, and per region pair (else ``inter_region``)."""

    intra_site: LinkProfile = field(default_factory=lambda: LinkProfile(0.2, 0.02))
    intra_region: LinkProfile = field(default_factory=lambda: LinkProfile(1.5, 0.2, 0.0, 25_000.0))
    inter_region: LinkProfile = field(default_factory=lambda: LinkProfile(40.0, 3.0, 0.001, 10_000.0))
    region_pairs: Mapping[frozenset[str], LinkProfile] = field(default_factory=dict)
    probes_per_round: int = 10

    def __post_init__(self) -> None:
        if self.probes_per_round < 1:
            raise ValueError("probes_per_round must be >= 1")

    def profile(self, src: SiteRef, dst: SiteRef) -> LinkProfile:
        if src == dst:
            return self.intra_site
        if src.region == dst.region:
            return self.intra_region
        return self.region_pairs.get(frozenset((src.region, dst.region)), self.inter_region)

    def sample(self, src: SiteRef, dst: SiteRef, round_no: int, rng: KeyedRandom) -> LinkSample:
        """One probe round, the same for the same (seed, link, round) on any machine."""
        profile = self.profile(src, dst)
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
        return LinkSample(
            sample.src_region,
            sample.src_site,
            sample.dst_region,
            sample.dst_site,
            sample.rtt_ms,
            sample.jitter_ms,
            sample.loss_ratio,
            sample.samples,
            bandwidth,
        )

    def sample_all(self, sites: Iterable[SiteRef], round_no: int, rng: KeyedRandom) -> list[LinkSample]:
        """Every ordered pair of distinct sites, in a stable order."""
        ordered = sorted(set(sites), key=lambda s: (s.region, s.site))
        return [self.sample(a, b, round_no, rng) for a in ordered for b in ordered if a != b]
