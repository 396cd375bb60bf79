"""Scripted network faults for simulated fleets: a link degrades to N ms, a link loses X %, a region is
partitioned; each from ``at_s`` and optionally until ``until_s``, seconds from the agent's start.

A link is named by its two ends, each a region id or a site name of the fleet, and a fault on it applies
in both directions (``[frankfurt, tokyo]``: every site pair between the two regions). A partitioned region
loses every probe to and from it. Format and examples: docs/sensing.md ("Network faults").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from suanli.sensing.domain.links import LinkProfile, SiteRef


class FaultError(ValueError):
    """A fault spec that cannot be used; one line naming the entry, e.g. ``faults[1].region: ...``."""


@dataclass(frozen=True, slots=True)
class FaultWindow:
    at_s: float
    until_s: float | None = None

    def active(self, elapsed_s: float) -> bool:
        return self.at_s <= elapsed_s and (self.until_s is None or elapsed_s < self.until_s)


@dataclass(frozen=True, slots=True)
class LinkEnds:
    a: str
    b: str

    def matches(self, src: SiteRef, dst: SiteRef) -> bool:
        return (_is(src, self.a) and _is(dst, self.b)) or (_is(src, self.b) and _is(dst, self.a))


def _is(site: SiteRef, name: str) -> bool:
    return name in (site.region, site.site)


@dataclass(frozen=True, slots=True)
class LinkDegraded:
    """The link's mean RTT becomes ``rtt_ms``; jitter follows, bandwidth falls with the longer RTT."""

    link: LinkEnds
    rtt_ms: float
    window: FaultWindow

    def applies(self, src: SiteRef, dst: SiteRef) -> bool:
        return self.link.matches(src, dst)

    def apply(self, profile: LinkProfile, jitter_ratio: float) -> LinkProfile:
        bandwidth = profile.bandwidth_mbps
        if bandwidth is not None and self.rtt_ms > profile.rtt_ms > 0:
            bandwidth *= profile.rtt_ms / self.rtt_ms
        jitter = max(profile.jitter_ms, jitter_ratio * self.rtt_ms)
        return replace(profile, rtt_ms=self.rtt_ms, jitter_ms=jitter, bandwidth_mbps=bandwidth)


@dataclass(frozen=True, slots=True)
class LinkLossy:
    """Each probe on the link is lost with at least ``loss_ratio``; bandwidth keeps the delivered share."""

    link: LinkEnds
    loss_ratio: float
    window: FaultWindow

    def applies(self, src: SiteRef, dst: SiteRef) -> bool:
        return self.link.matches(src, dst)

    def apply(self, profile: LinkProfile, jitter_ratio: float) -> LinkProfile:
        loss = max(profile.loss_ratio, self.loss_ratio)
        bandwidth = None if profile.bandwidth_mbps is None else profile.bandwidth_mbps * (1 - loss)
        return replace(profile, loss_ratio=loss, bandwidth_mbps=bandwidth)


@dataclass(frozen=True, slots=True)
class RegionPartitioned:
    """Every link to or from ``region`` loses every probe."""

    region: str
    window: FaultWindow

    def applies(self, src: SiteRef, dst: SiteRef) -> bool:
        return self.region in (src.region, dst.region)

    def apply(self, profile: LinkProfile, jitter_ratio: float) -> LinkProfile:
        return replace(
            profile, loss_ratio=1.0, bandwidth_mbps=None if profile.bandwidth_mbps is None else 0.0
        )


Fault = LinkDegraded | LinkLossy | RegionPartitioned


@dataclass(frozen=True, slots=True)
class ActiveFaults:
    """The faults in force at ``elapsed_s``, as the link model's profile adjustment."""

    faults: tuple[Fault, ...]
    elapsed_s: float
    jitter_ratio: float

    def __call__(self, src: SiteRef, dst: SiteRef, profile: LinkProfile) -> LinkProfile:
        for fault in self.faults:
            if fault.window.active(self.elapsed_s) and fault.applies(src, dst):
                profile = fault.apply(profile, self.jitter_ratio)
        return profile


_KINDS = {
    "degrade": {"kind", "link", "rtt_ms", "at_s", "until_s"},
    "loss": {"kind", "link", "loss_pct", "at_s", "until_s"},
    "partition": {"kind", "region", "at_s", "until_s"},
}


def parse_faults(
    raw: Any, *, regions: Collection[str], sites: Collection[str], path: str = "faults"
) -> tuple[Fault, ...]:
    """Validate a list of fault entries against the fleet's region ids and site names."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FaultError(f"{path}: expected a list of faults, got {type(raw).__name__}")
    names = _Names(frozenset(regions), frozenset(sites))
    return tuple(_fault(entry, f"{path}[{i}]", names) for i, entry in enumerate(raw))


@dataclass(frozen=True, slots=True)
class _Names:
    regions: frozenset[str]
    sites: frozenset[str]

    def region(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or value not in self.regions:
            raise FaultError(
                f"{path}: {value!r} is not a region of this fleet ({', '.join(sorted(self.regions))})"
            )
        return value

    def end(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or value not in self.regions | self.sites:
            raise FaultError(f"{path}: {value!r} is neither a region nor a site of this fleet")
        return value


def _fault(entry: Any, path: str, names: _Names) -> Fault:
    if not isinstance(entry, Mapping):
        raise FaultError(f"{path}: expected a mapping, got {type(entry).__name__}")
    kind = entry.get("kind")
    if kind not in _KINDS:
        raise FaultError(f"{path}.kind: expected one of {', '.join(_KINDS)}, got {kind!r}")
    unknown = sorted(str(k) for k in entry if k not in _KINDS[kind])
    if unknown:
        raise FaultError(f"{path}: unknown field {unknown[0]!r} for a {kind} fault")
    window = _window(entry, path)
    if kind == "partition":
        return RegionPartitioned(names.region(entry.get("region"), f"{path}.region"), window)
    link = _link(entry.get("link"), f"{path}.link", names)
    if kind == "degrade":
        return LinkDegraded(link, _number(entry.get("rtt_ms"), f"{path}.rtt_ms"), window)
    loss_pct = _number(entry.get("loss_pct"), f"{path}.loss_pct")
    if loss_pct > 100:
        raise FaultError(f"{path}.loss_pct: expected 0..100, got {loss_pct:g}")
    return LinkLossy(link, loss_pct / 100, window)


def _window(entry: Mapping[str, Any], path: str) -> FaultWindow:
    at_s = _number(entry.get("at_s", 0), f"{path}.at_s")
    until = entry.get("until_s")
    if until is None:
        return FaultWindow(at_s)
    until_s = _number(until, f"{path}.until_s")
    if until_s <= at_s:
        raise FaultError(f"{path}.until_s: {until_s:g} is not after at_s {at_s:g}")
    return FaultWindow(at_s, until_s)


def _link(value: Any, path: str, names: _Names) -> LinkEnds:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise FaultError(f"{path}: expected two ends [region or site, region or site], got {value!r}")
    a, b = names.end(value[0], f"{path}[0]"), names.end(value[1], f"{path}[1]")
    if a == b:
        raise FaultError(f"{path}: both ends are {a!r}")
    return LinkEnds(a, b)


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultError(f"{path}: expected a number, got {value!r}")
    if value < 0:
        raise FaultError(f"{path}: must not be negative, got {value!r}")
    return float(value)
