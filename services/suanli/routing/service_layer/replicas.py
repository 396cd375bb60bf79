"""ResolveReplica as a use case: one inference request -> the replica to take it, by a balancing policy.

The endpoints are the fresh reports of the load view (`suanli.contracts.load`: the newest report per
replica, stale after three of its own intervals), in replica-id order so that round-robin and the
tie-breaks are stable. RTTs for network-aware come from the network view's region summaries: a DOWN
pair is infinitely far, and so is a pair nothing was measured on (the same as Resolve's NO_PATH), while
inside a region it is the configured intra-region RTT.

Each replica's report is read together with the requests this resolver sent it after that report
(`SentSinceReport`, `balancing.with_sent`): reports come once per interval, and without them every
request of an interval would go to the replica that looked best at its start.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from suanli.contracts.load import STALE_INTERVALS, LoadView, ReplicaLoad
from suanli.errors import NotFound
from suanli.routing.domain.balancing import (
    BALANCERS,
    Choice,
    Endpoint,
    InferenceRequest,
    LeastOutstanding,
    NetworkAware,
    NoEndpoint,
    PowerOfTwo,
    RoundRobin,
    RttMs,
    expected_latency_s,
    view_rtt,
    with_sent,
)
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.router import InvalidRequest

DEFAULT_POLICY = "network-aware"


@dataclass(frozen=True, slots=True)
class ReplicaQuery:
    """What a caller asks (the RPC's fields)."""

    service_id: str
    client_region: str = ""
    policy: str = ""
    context_tokens: int = 0
    generated_tokens: int = 0
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Considered:
    """A replica the policy looked at, with network-aware's estimate (None for the other policies)."""

    load: ReplicaLoad
    expected_s: float | None = None
    rtt_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ReplicaChoice:
    choice: Choice
    chosen: Considered
    alternatives: list[Considered] = field(default_factory=list)


class SentSinceReport:
    """The requests sent to each replica and when, kept until a report of the replica covers them.

    A report sampled at or after a send includes that request (it reached the replica first, over
    loopback or a LAN, well within an interval); sends older than the report's staleness bound are
    dropped too, so a clock skew between replica and router cannot keep them forever.
    """

    def __init__(self) -> None:
        self._sent: dict[tuple[str, str], list[tuple[datetime, InferenceRequest]]] = {}

    def add(self, load: ReplicaLoad, request: InferenceRequest, at: datetime) -> None:
        self._sent.setdefault((load.service_id, load.replica_id), []).append((at, request))

    def since(self, load: ReplicaLoad, now: datetime) -> list[InferenceRequest]:
        """What was sent to `load`'s replica after `load` was sampled (older sends are forgotten)."""
        key = (load.service_id, load.replica_id)
        sent = self._sent.get(key)
        if not sent:
            return []
        oldest = now - timedelta(seconds=STALE_INTERVALS * load.interval_s)
        kept = [(at, r) for at, r in sent if at > load.reported_at and at > oldest]
        if kept:
            self._sent[key] = kept
        else:
            del self._sent[key]
        return [r for _, r in kept]

    def keep_only(self, service_id: str, replicas: Collection[str]) -> None:
        """Forget the sends to replicas of `service_id` that are no longer fresh."""
        for key in [k for k in self._sent if k[0] == service_id and k[1] not in replicas]:
            del self._sent[key]


class ReplicaResolver:
    def __init__(
        self,
        loads: LoadView,
        network: NetworkState,
        now: Callable[[], datetime],
        *,
        intra_region_ms: float,
        spill_margin_s: float = 0.05,
        rng: random.Random | None = None,
    ) -> None:
        self.loads = loads
        self.network = network
        self.now = now
        self.intra_region_ms = intra_region_ms
        self.spill_margin_s = spill_margin_s
        self._rng = rng or random.Random()
        # Round-robin's turn is per service: one busy service must not skip another's replicas.
        self._turns: dict[str, RoundRobin] = {}
        self.sent = SentSinceReport()

    def resolve(self, q: ReplicaQuery) -> ReplicaChoice:
        policy = q.policy or DEFAULT_POLICY
        if policy not in BALANCERS:
            raise InvalidRequest("policy", f"unknown policy {q.policy!r}; one of {', '.join(BALANCERS)}")
        if not q.service_id:
            raise InvalidRequest("service_id", "is required")
        for name in ("context_tokens", "generated_tokens"):
            if getattr(q, name) < 0:
                raise InvalidRequest(name, f"must be 0 or more, got {getattr(q, name)}")
        if policy == "network-aware" and not q.client_region:
            raise InvalidRequest("client_region", "is required by network-aware (the origin of every RTT)")
        now = self.now()
        fresh = self.loads.of(q.service_id, now)
        self.sent.keep_only(q.service_id, fresh)
        if not fresh:
            if not self.loads.knows(q.service_id):
                raise NotFound(f"no load report of service {q.service_id!r}")
            raise NoEndpoint(f"service {q.service_id!r} has no fresh replica (every report is stale)")
        loads = [fresh[r] for r in sorted(fresh) if r not in q.exclude]
        if not loads:
            raise NoEndpoint(f"every fresh replica of {q.service_id!r} is excluded ({', '.join(q.exclude)})")
        request = InferenceRequest(q.client_region, q.context_tokens, max(1, q.generated_tokens))
        rtt = self._rtt()
        endpoints = {x.replica_id: with_sent(_endpoint(x), self.sent.since(x, now)) for x in loads}
        choice = self._policy(policy, q.service_id, rtt).pick(request, list(endpoints.values()))

        def considered(load: ReplicaLoad) -> Considered:
            if policy != "network-aware":
                return Considered(load)
            e = endpoints[load.replica_id]
            return Considered(load, expected_latency_s(request, e, rtt), rtt(q.client_region, load.region))

        chosen = next(x for x in loads if x.replica_id == choice.endpoint.endpoint_id)
        self.sent.add(chosen, request, now)
        others = [considered(x) for x in loads if x is not chosen]
        if policy == "network-aware":
            others.sort(key=lambda c: (c.expected_s, c.load.replica_id))
        return ReplicaChoice(choice, considered(chosen), others)

    def _policy(
        self, name: str, service_id: str, rtt: RttMs
    ) -> RoundRobin | LeastOutstanding | PowerOfTwo | NetworkAware:
        if name == "round-robin":
            return self._turns.setdefault(service_id, RoundRobin())
        if name == "least-outstanding":
            return LeastOutstanding()
        if name == "power-of-two":
            return PowerOfTwo(self._rng.randrange)
        return NetworkAware(rtt, self.spill_margin_s)

    def _rtt(self) -> RttMs:
        regions = {(s.src_region, s.dst_region): s for s in self.network.region_links()}

        def unmeasured(src: str, dst: str) -> float:
            return self.intra_region_ms if src == dst else math.inf

        return view_rtt(regions, unmeasured)


def _endpoint(load: ReplicaLoad) -> Endpoint:
    return Endpoint(
        endpoint_id=load.replica_id,
        region=load.region,
        in_flight=load.in_flight,
        queued=load.queued,
        max_batch=load.max_batch,
        # A report of no prefill throughput (a replica still loading) estimates as very slow, not as a crash.
        prefill_tokens_per_s=max(load.prefill_tokens_per_s, 1e-9),
        decode_step_s=load.decode_step_s,
        recent_latency_s=load.recent_latency_s,
        prefill_backlog_s=load.prefill_backlog_s,
        kv_free_tokens=load.kv_free_tokens,
    )
