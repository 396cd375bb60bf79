"""One network path's state, folded from probe rounds: EWMA RTT and loss, p95 jitter, status.

The fold is a pure function of the previous state, a probe round and the `ViewPolicy`; time comes in as
the probe's own timestamp or as ``now_ms`` from the caller's clock. A link's status:

- DOWN: every probe of the latest round was lost, or no round arrived for ``down_after`` probe intervals
  (the path's own interval, learned from the gaps between its rounds; ``probe_interval_ms`` until known);
- DEGRADED: EWMA loss above ``loss_degraded``, or EWMA RTT above ``rtt_degraded_ratio`` × the baseline
  (and at least ``rtt_degraded_min_ms`` above it, so a 1 ms path does not flap on 0.5 ms of noise);
- OK otherwise. The baseline is the lowest round RTT seen: the path's propagation delay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from suanli.errors import InvalidArgument

SITE: str = "site"
REGION: str = "region"


class LinkStatus(StrEnum):
    UNKNOWN = "UNKNOWN"
    OK = "OK"
    DEGRADED = "DEGRADED"
    DOWN = "DOWN"


def site_link_id(src_site: str, dst_site: str) -> str:
    return f"{src_site}->{dst_site}"


def region_link_id(src_region: str, dst_region: str) -> str:
    return f"region:{src_region}->{dst_region}"


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe round between two sites, as `LinkMeasured` reports it (validated: see probes.py)."""

    src_region: str
    src_site: str
    dst_region: str
    dst_site: str
    rtt_ms: float
    jitter_ms: float
    loss_ratio: float
    bandwidth_mbps: float | None
    samples: int
    at_ms: int

    @property
    def link_id(self) -> str:
        return site_link_id(self.src_site, self.dst_site)

    @property
    def all_lost(self) -> bool:
        return self.loss_ratio >= 1.0


@dataclass(frozen=True, slots=True)
class ViewPolicy:
    """The documented constants of the view (docs/routing.md, "Settings" sets them)."""

    rtt_alpha: float = 0.3
    loss_alpha: float = 0.3
    jitter_window: int = 20
    loss_degraded: float = 0.05
    rtt_degraded_ratio: float = 1.5
    rtt_degraded_min_ms: float = 5.0
    # The sensing agents' default cadence; each path's own interval replaces it once two rounds arrived.
    probe_interval_ms: int = 30_000
    down_after: int = 3
    # A new state is published when it differs from the last published one by at least this much.
    rtt_change_ratio: float = 0.10
    rtt_change_min_ms: float = 1.0
    loss_change: float = 0.01
    bandwidth_change_ratio: float = 0.10
    republish_ms: int = 30_000
    # A round stamped further ahead of the view's clock than this is refused: folded, it would make every
    # later real round look old and the link could never go DOWN (the view is seeded from its own output).
    max_future_ms: int = 60_000

    def refuse_future(self, at_ms: int, now_ms: int) -> None:
        """Raise ``InvalidArgument`` for a round stamped more than ``max_future_ms`` after ``now_ms``."""
        if at_ms > now_ms + self.max_future_ms:
            raise InvalidArgument(
                f"occurred_at {at_ms - now_ms} ms ahead of the view's clock (at most {self.max_future_ms} ms)"
            )

    def stale_after_ms(self, state: LinkState) -> int:
        """Silence after which ``state`` is DOWN: down_after of its own probe intervals."""
        return self.down_after * (state.interval_ms or self.probe_interval_ms)


@dataclass(frozen=True, slots=True)
class LinkState:
    """Full state of one path: what `NetworkLinkChanged` carries (``jitters`` is the recent window)."""

    link_id: str
    scope: str
    src_region: str
    src_site: str
    dst_region: str
    dst_site: str
    rtt_ms: float
    baseline_rtt_ms: float
    jitters: tuple[float, ...]
    loss_ratio: float
    bandwidth_mbps: float | None
    last_probe_ms: int
    status: LinkStatus
    reason: str
    rounds: int
    # The prober's cadence on this path, learned from the gaps between rounds (0: not yet known).
    interval_ms: int = 0

    @property
    def jitter_p95_ms(self) -> float:
        return p95(self.jitters)

    @property
    def region_pair(self) -> tuple[str, str]:
        return (self.src_region, self.dst_region)


def p95(values: tuple[float, ...]) -> float:
    """Nearest-rank 95th percentile (0 for no values): on 20 rounds, the second highest."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _ewma(previous: float, sample: float, alpha: float) -> float:
    return alpha * sample + (1.0 - alpha) * previous


def judge(rtt_ms: float, baseline_ms: float, loss: float, policy: ViewPolicy) -> tuple[LinkStatus, str]:
    """The status of a link that answered, and why."""
    if loss > policy.loss_degraded:
        return LinkStatus.DEGRADED, f"loss {loss:.1%} > {policy.loss_degraded:.1%}"
    limit = baseline_ms * policy.rtt_degraded_ratio
    if baseline_ms > 0 and rtt_ms > limit and rtt_ms - baseline_ms >= policy.rtt_degraded_min_ms:
        return (
            LinkStatus.DEGRADED,
            f"rtt {rtt_ms:.1f} ms > {policy.rtt_degraded_ratio:g} x baseline {baseline_ms:.1f} ms",
        )
    return LinkStatus.OK, ""


def fold(state: LinkState | None, probe: Probe, policy: ViewPolicy) -> LinkState:
    """The link's state after ``probe``. A round no newer than the last one folded is a replay: ignored."""
    if state is not None and probe.at_ms <= state.last_probe_ms:
        return state
    if state is None:
        rtt = 0.0 if probe.all_lost else probe.rtt_ms
        loss = probe.loss_ratio
        baseline = rtt
        jitters: tuple[float, ...] = ()
        bandwidth = probe.bandwidth_mbps
        rounds = 0
        interval = 0
    else:
        # A lost round has no RTT: the figures keep their last value, only the loss moves.
        rtt = (
            state.rtt_ms
            if probe.all_lost
            else _ewma(state.rtt_ms or probe.rtt_ms, probe.rtt_ms, policy.rtt_alpha)
        )
        loss = _ewma(state.loss_ratio, probe.loss_ratio, policy.loss_alpha)
        baseline = state.baseline_rtt_ms
        if not probe.all_lost and (baseline <= 0 or probe.rtt_ms < baseline):
            baseline = probe.rtt_ms
        jitters = state.jitters
        bandwidth = probe.bandwidth_mbps if probe.bandwidth_mbps is not None else state.bandwidth_mbps
        rounds = state.rounds
        gap = probe.at_ms - state.last_probe_ms
        interval = round(_ewma(state.interval_ms, gap, policy.rtt_alpha)) if state.interval_ms else gap
    if not probe.all_lost:
        jitters = (*jitters, probe.jitter_ms)[-policy.jitter_window :]
    if probe.all_lost:
        status, reason = LinkStatus.DOWN, f"all {probe.samples} probes of the round lost"
    else:
        status, reason = judge(rtt, baseline, loss, policy)
    return LinkState(
        link_id=probe.link_id,
        scope=SITE,
        src_region=probe.src_region,
        src_site=probe.src_site,
        dst_region=probe.dst_region,
        dst_site=probe.dst_site,
        rtt_ms=rtt,
        baseline_rtt_ms=baseline,
        jitters=jitters,
        loss_ratio=loss,
        bandwidth_mbps=bandwidth,
        last_probe_ms=probe.at_ms,
        status=status,
        reason=reason,
        rounds=rounds + 1,
        interval_ms=interval,
    )


def expire(state: LinkState, now_ms: int, policy: ViewPolicy) -> LinkState | None:
    """DOWN when no round arrived for ``down_after`` probe intervals; None when nothing changes."""
    silent_ms = now_ms - state.last_probe_ms
    if state.status is LinkStatus.DOWN or silent_ms < policy.stale_after_ms(state):
        return None
    intervals = silent_ms / (state.interval_ms or policy.probe_interval_ms)
    return replace(
        state,
        status=LinkStatus.DOWN,
        reason=f"no probe for {silent_ms / 1000:.1f} s ({intervals:.1f} probe intervals)",
    )


def differs(published: LinkState | None, current: LinkState, policy: ViewPolicy) -> bool:
    """Whether ``current`` is worth publishing over what was published last (not every probe is)."""
    if published is None or published.status is not current.status:
        return True
    delta = abs(current.rtt_ms - published.rtt_ms)
    if delta >= max(policy.rtt_change_min_ms, policy.rtt_change_ratio * published.rtt_ms):
        return True
    if abs(current.loss_ratio - published.loss_ratio) >= policy.loss_change:
        return True
    old, new = published.bandwidth_mbps, current.bandwidth_mbps
    if (old is None) != (new is None):
        return True
    return old is not None and new is not None and abs(new - old) >= policy.bandwidth_change_ratio * old


def summarise(src_region: str, dst_region: str, paths: list[LinkState]) -> LinkState:
    """The region pair's summary over its site paths: the figures of the paths that are up.

    RTT and baseline are the median over the up paths, loss their mean, jitter the p95 of their p95s,
    bandwidth the best measured. DOWN when every path is down (a partition); DEGRADED when some path is
    down or at least half of the up paths are degraded.
    """
    up = [p for p in paths if p.status is not LinkStatus.DOWN]
    basis = up or paths
    degraded = sum(p.status is LinkStatus.DEGRADED for p in up)
    down = len(paths) - len(up)
    if not up:
        status, reason = LinkStatus.DOWN, f"all {len(paths)} site paths down"
    elif down:
        status, reason = LinkStatus.DEGRADED, f"{down} of {len(paths)} site paths down"
    elif 2 * degraded >= len(up):
        status, reason = LinkStatus.DEGRADED, f"{degraded} of {len(up)} site paths degraded"
    else:
        status, reason = LinkStatus.OK, ""
    bandwidths = [p.bandwidth_mbps for p in up if p.bandwidth_mbps is not None]
    return LinkState(
        link_id=region_link_id(src_region, dst_region),
        scope=REGION,
        src_region=src_region,
        src_site="",
        dst_region=dst_region,
        dst_site="",
        rtt_ms=_median([p.rtt_ms for p in basis]),
        baseline_rtt_ms=_median([p.baseline_rtt_ms for p in basis]),
        jitters=tuple(p.jitter_p95_ms for p in basis),
        loss_ratio=sum(p.loss_ratio for p in basis) / len(basis),
        bandwidth_mbps=max(bandwidths) if bandwidths else None,
        last_probe_ms=max(p.last_probe_ms for p in paths),
        status=status,
        reason=reason,
        rounds=sum(p.rounds for p in paths),
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
