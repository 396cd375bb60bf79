"""Load balancing across a service's replicas: which endpoint takes one request (pure, decisions explained).

Four policies over the same `Endpoint` load reports:

- `round-robin`: the ready endpoints in turn, blind to load and distance.
- `least-outstanding`: the fewest requests in flight + queued (ties: the first listed).
- `power-of-two`: two endpoints drawn at random (the draw is injected), the less loaded of the two
  (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", 2001).
- `network-aware` (ours): the lowest *expected latency* as the client sees it,

      expected = RTT(client region, endpoint region) + wait + prefill + decode
      wait     = prefill backlog (the prefills ahead of it, serialised)
                 + (recent latency / in flight, when the batch or the KV cache has no room for it)
      prefill  = context tokens / prefill tokens per s;   decode = (generated - 1) x decode step

  (ties: fewer outstanding requests first)
  taken first among the endpoints of the client's *home* region (the nearest region that has any), and
  spilling to another region only when that endpoint's expected latency is lower than the home best by
  more than `spill_margin_s`: a spill costs an RTT for certain and saves queueing only by estimate.

Between two load reports an endpoint's figures stand still while requests keep arriving: a balancer
that only read them would send every request of that interval to the same endpoint (at the demo's 4
requests/s and 1 s reports, bursts of 4 onto one replica while the others idle). `with_sent` adds what
the balancer itself sent since the report, as queued work, so each pick sees the ones before it.

RTTs come from a function of two region ids: `measured_rtt` wraps the measured tables of
`suanli.resources.network`; `view_rtt` reads the network view's region-pair states (`NetworkView.regions`),
where a DOWN pair is infinitely far: the network-aware policy never sends a request over it, and answers
`NoEndpoint` when every endpoint is behind one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from suanli.errors import FailedPrecondition, InvalidArgument
from suanli.resources.network import MeasuredNetwork
from suanli.routing.domain.links import LinkState, LinkStatus

RttMs = Callable[[str, str], float]
DEFAULT_INTRA_REGION_MS = 1.0  # when the zones table lacks a region: the order of its zone RTTs


class NoEndpoint(FailedPrecondition):
    pass


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One ready replica as the load view shows it."""

    endpoint_id: str
    region: str
    in_flight: int
    queued: int
    max_batch: int
    prefill_tokens_per_s: float
    decode_step_s: float  # one decode step at the replica's current batch
    recent_latency_s: float
    prefill_backlog_s: float = 0.0  # prefill work ahead of a new request
    kv_free_tokens: int = 1 << 62  # KV cache neither held nor promised to queued requests

    @property
    def outstanding(self) -> int:
        return self.in_flight + self.queued


@dataclass(frozen=True, slots=True)
class InferenceRequest:
    client_region: str
    context_tokens: int
    generated_tokens: int


def with_sent(endpoint: Endpoint, sent: Sequence[InferenceRequest]) -> Endpoint:
    """`endpoint` with `sent` (requests routed to it after its report) counted as queued behind its work.

    Each adds one outstanding request, its prefill to the backlog and its whole KV need (context +
    generated) to what is promised: what the endpoint's next report would show had it arrived.
    """
    if not sent:
        return endpoint
    context = sum(r.context_tokens for r in sent)
    need = context + sum(r.generated_tokens for r in sent)
    return replace(
        endpoint,
        queued=endpoint.queued + len(sent),
        prefill_backlog_s=endpoint.prefill_backlog_s + context / endpoint.prefill_tokens_per_s,
        kv_free_tokens=max(0, endpoint.kv_free_tokens - need),
    )


@dataclass(frozen=True, slots=True)
class Choice:
    """The endpoint picked and why."""

    endpoint: Endpoint
    policy: str
    reason: str
    expected_s: float | None = None  # network-aware only: the chosen endpoint's expected latency
    home_region: str | None = None
    home_expected_s: float | None = None
    spilled: bool = False


def measured_rtt(network: MeasuredNetwork, intra_region_ms: float | None = None) -> RttMs:
    """RTT between region ids from the measured tables; inside a region the mean of its zone pairs."""
    intra: dict[str, float] = {}
    for region in network.regions:
        zones = network.zones_of(region)
        values = [v for (a, b), v in network.zone_rtt_ms.items() if a in zones and b in zones]
        intra[region] = sum(values) / len(values) if values else DEFAULT_INTRA_REGION_MS
    table = dict(network.region_rtt_ms)

    def rtt(src: str, dst: str) -> float:
        if src == dst:
            return intra_region_ms if intra_region_ms is not None else intra.get(src, DEFAULT_INTRA_REGION_MS)
        value = table.get((src, dst))
        if value is None:
            raise InvalidArgument(f"no measured RTT from {src!r} to {dst!r}")
        return value

    return rtt


def view_rtt(regions: Mapping[tuple[str, str], LinkState], fallback: RttMs) -> RttMs:
    """RTT from the network view's region-pair summaries: inf when DOWN, `fallback` where it has none."""

    def rtt(src: str, dst: str) -> float:
        state = regions.get((src, dst))
        if state is None or src == dst:
            return fallback(src, dst)
        return math.inf if state.status == LinkStatus.DOWN else state.rtt_ms

    return rtt


def _require(endpoints: Sequence[Endpoint]) -> None:
    if not endpoints:
        raise NoEndpoint("the service has no ready endpoint")


class RoundRobin:
    name = "round-robin"

    def __init__(self) -> None:
        self._next = 0

    def pick(self, request: InferenceRequest, endpoints: Sequence[Endpoint]) -> Choice:
        _require(endpoints)
        endpoint = endpoints[self._next % len(endpoints)]
        self._next += 1
        return Choice(endpoint, self.name, "next in turn")


class LeastOutstanding:
    name = "least-outstanding"

    def pick(self, request: InferenceRequest, endpoints: Sequence[Endpoint]) -> Choice:
        _require(endpoints)
        endpoint = min(endpoints, key=lambda e: e.outstanding)
        return Choice(endpoint, self.name, f"{endpoint.outstanding} outstanding, the fewest")


class PowerOfTwo:
    name = "power-of-two"

    def __init__(self, draw: Callable[[int], int]) -> None:
        self._draw = draw  # an index below its argument, uniformly (seeded by the caller)

    def pick(self, request: InferenceRequest, endpoints: Sequence[Endpoint]) -> Choice:
        _require(endpoints)
        if len(endpoints) == 1:
            return Choice(endpoints[0], self.name, "the only endpoint")
        first = self._draw(len(endpoints))
        second = self._draw(len(endpoints) - 1)
        second += second >= first  # two distinct endpoints
        a, b = endpoints[first], endpoints[second]
        endpoint = b if b.outstanding < a.outstanding else a
        return Choice(
            endpoint,
            self.name,
            f"drew {a.endpoint_id} ({a.outstanding}) and {b.endpoint_id} ({b.outstanding})",
        )


def expected_latency_s(request: InferenceRequest, endpoint: Endpoint, rtt_ms: RttMs) -> float:
    """The network-aware policy's estimate of the request's end-to-end latency at `endpoint`."""
    need = request.context_tokens + request.generated_tokens
    full = endpoint.outstanding >= endpoint.max_batch or need > endpoint.kv_free_tokens
    wait = endpoint.prefill_backlog_s + (
        endpoint.recent_latency_s / max(1, endpoint.in_flight) if full else 0.0
    )
    prefill = request.context_tokens / endpoint.prefill_tokens_per_s
    decode = max(0, request.generated_tokens - 1) * endpoint.decode_step_s
    return rtt_ms(request.client_region, endpoint.region) / 1000 + wait + prefill + decode


class NetworkAware:
    name = "network-aware"

    def __init__(self, rtt_ms: RttMs, spill_margin_s: float = 0.05) -> None:
        if spill_margin_s < 0:
            raise InvalidArgument(f"spill_margin_s must be >= 0 (got {spill_margin_s})")
        self.rtt_ms = rtt_ms
        self.spill_margin_s = spill_margin_s

    def pick(self, request: InferenceRequest, endpoints: Sequence[Endpoint]) -> Choice:
        _require(endpoints)
        regions = sorted({e.region for e in endpoints})
        home = min(regions, key=lambda r: (self.rtt_ms(request.client_region, r), r))
        if math.isinf(self.rtt_ms(request.client_region, home)):
            raise NoEndpoint(f"every endpoint's region is unreachable from {request.client_region}")
        scored = [
            (expected_latency_s(request, e, self.rtt_ms), e.outstanding, i, e)
            for i, e in enumerate(endpoints)
        ]
        home_best = min(s for s in scored if s[3].region == home)
        best = min(scored)
        if best[3].region != home and best[0] + self.spill_margin_s < home_best[0]:
            return Choice(
                best[3],
                self.name,
                f"spilled from {home}: {best[0]:.3f} s expected vs {home_best[0]:.3f} s at home",
                best[0],
                home,
                home_best[0],
                spilled=True,
            )
        return Choice(
            home_best[3],
            self.name,
            f"home region {home}, {home_best[0]:.3f} s expected",
            home_best[0],
            home,
            home_best[0],
        )


BALANCERS = ("round-robin", "least-outstanding", "power-of-two", "network-aware")
