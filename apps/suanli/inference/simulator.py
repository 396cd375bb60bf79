"""A discrete-event simulation of an inference service: trace -> balancer -> replicas, with an autoscaler.

Time advances from event to event: the next arrival, the next autoscaler tick (every `tick_s`) or the next
replica becoming ready (cold start over). Replicas are independent between those events, so each is run up
to the event's time (`ReplicaQueue.advance`, exact in its own model) before the balancer reads their load.

- A request arrives from its client region at the trace's offset, is routed to a ready replica by the
  balancer and queued there; the client sees TTFT = first token - arrival + RTT(client, replica region) and
  end-to-end = last token - arrival + RTT. With no ready replica (scale to zero, all starting) it waits at
  the gateway and is dropped after `gateway_timeout_s`; a replica drops requests that waited longer than
  its `queue_timeout_s` for a batch slot.
- A request meets the SLO when served with TTFT <= ttft target and end-to-end <= ttft target + (generated
  - 1) x tpot target. Dropped requests miss it.
- The autoscaler is asked every tick; its decisions apply after `warmup_s` (60 s) of filling its windows.
- A scale-up orders replicas that hold their GPU share from the order on and serve after `cold_start_s`;
  they go to the region furthest below its share of demand (`regions.apportion`). A scale-down cancels
  starting replicas first, then drains the least loaded ready ones of the regions most above their share
  (no new requests; released when empty).
- GPU-seconds: each replica's GPU share x the time from its order to its release, within the trace's span.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from suanli.replica.batch import Outcome, ReplicaQueue, Request
from suanli.replica.service_time import ReplicaSpeed
from suanli.routing.domain.balancing import (
    Choice,
    Endpoint,
    InferenceRequest,
    LeastOutstanding,
    NetworkAware,
    PowerOfTwo,
    RoundRobin,
    RttMs,
)
from suanli.serving.domain.autoscaling import ScaleDecision, ScalerInputs
from suanli.serving.domain.regions import apportion
from suanli.serving.domain.spec import e2e_target_s
from suanli.serving.domain.trace import Trace


class Autoscaler(Protocol):
    @property
    def name(self) -> str: ...

    def decide(self, seen: ScalerInputs) -> ScaleDecision: ...


class Balancer(Protocol):
    @property
    def name(self) -> str: ...

    def pick(self, request: InferenceRequest, endpoints: Sequence[Endpoint]) -> Choice: ...


def make_balancer(name: str, rtt: RttMs, rng: np.random.Generator) -> Balancer:
    def draw(n: int) -> int:
        return int(rng.integers(n))

    table: dict[str, Callable[[], Balancer]] = {
        "round-robin": RoundRobin,
        "least-outstanding": LeastOutstanding,
        "power-of-two": lambda: PowerOfTwo(draw),
        "network-aware": lambda: NetworkAware(rtt),
    }
    if name not in table:
        raise ValueError(f"unknown balancer {name!r}; known: {', '.join(table)}")
    return table[name]()


@dataclass(frozen=True, slots=True)
class SimSetup:
    speed: ReplicaSpeed
    gpus_per_replica: float
    regions: tuple[str, ...]  # the service's regions
    region_shares: Mapping[str, float]  # demand share each serves (nearest clients)
    ttft_s: float
    tpot_s: float
    cold_start_s: float
    initial_replicas: int
    spread: int = 1  # regions that keep at least one replica
    tick_s: float = 2.0
    # The autoscaler decides from the first tick (its windows fill) but its decisions apply only after
    # this: the service ran at its starting count before the trace began, and empty windows at t=0 would
    # read the first seconds' ramp-up of in-flight requests as a collapse of the load.
    warmup_s: float = 60.0
    queue_timeout_s: float = 30.0
    gateway_timeout_s: float = 30.0


@dataclass(slots=True)
class _Replica:
    replica_id: str
    region: str
    queue: ReplicaQueue
    ordered_s: float
    ready_s: float
    released_s: float = math.inf
    draining: bool = False


@dataclass
class SimResult:
    autoscaler: str
    balancer: str
    requests: int
    served: int
    dropped: int
    slo_met: int
    ttft_s: npt.NDArray[np.float64]  # per request, nan when dropped
    e2e_s: npt.NDArray[np.float64]
    met: npt.NDArray[np.bool_]
    spilled: int
    gpu_seconds: float
    scale_events: int
    cold_starts: int
    timeline: list[tuple[float, int, int, int]]  # (t, ready, starting, arrivals in the tick)
    decisions: list[ScaleDecision] = field(default_factory=list)

    @property
    def attainment(self) -> float:
        return self.slo_met / self.requests if self.requests else 1.0


class Simulation:
    def __init__(
        self,
        setup: SimSetup,
        trace: Trace,
        clients: Sequence[str],
        autoscaler: Autoscaler,
        balancer: Balancer,
        rtt: RttMs,
    ) -> None:
        if len(clients) != len(trace):
            raise ValueError("one client region per request")
        self.setup = setup
        self.trace = trace
        self.clients = clients
        self.autoscaler = autoscaler
        self.balancer = balancer
        self.rtt = rtt
        n = len(trace)
        self.ttft = np.full(n, np.nan)
        self.e2e = np.full(n, np.nan)
        self.rtt_s = np.zeros(n)
        self.replicas: list[_Replica] = []
        self.gateway: deque[int] = deque()
        self.decisions: list[ScaleDecision] = []
        self.timeline: list[tuple[float, int, int, int]] = []
        self.spilled = 0
        self.cold_starts = 0
        self._serial = 0
        self._arrived_in_tick: list[int] = []
        self.end_s = float(trace.offset_s[-1]) if n else 0.0

    # -- replicas -------------------------------------------------------------------------------------
    def _order(self, region: str, now_s: float, warm: bool = False) -> None:
        self._serial += 1
        ready = now_s if warm else now_s + self.setup.cold_start_s
        queue = ReplicaQueue(self.setup.speed, queue_timeout_s=self.setup.queue_timeout_s)
        self.replicas.append(_Replica(f"{region}/{self._serial}", region, queue, now_s, ready))
        if not warm:
            self.cold_starts += 1

    def _active(self) -> list[_Replica]:
        return [r for r in self.replicas if not r.draining and r.released_s == math.inf]

    def _ready(self, now_s: float) -> list[_Replica]:
        return [r for r in self._active() if r.ready_s <= now_s]

    def _scale(self, desired: int, now_s: float) -> None:
        active = self._active()
        goal = apportion(desired, self.setup.region_shares, self.setup.spread)
        have: dict[str, list[_Replica]] = {region: [] for region in goal}
        for replica in active:
            have[replica.region].append(replica)
        for region, count in goal.items():
            for _ in range(count - len(have[region])):
                self._order(region, now_s)
            surplus = len(have[region]) - count
            if surplus <= 0:
                continue
            # Cancel the latest-ordered starting replicas first, then drain the least loaded ready ones.
            ranked = sorted(
                have[region], key=lambda r: (r.ready_s <= now_s, r.queue.outstanding, -r.ordered_s)
            )
            for replica in ranked[:surplus]:
                if replica.ready_s > now_s:
                    replica.released_s = now_s
                else:
                    replica.draining = True

    # -- requests -------------------------------------------------------------------------------------
    def _record(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            request = outcome.request
            if outcome.dropped:
                continue
            i = request.request_id
            arrival = float(self.trace.offset_s[i])
            self.ttft[i] = request.first_token_s - arrival + self.rtt_s[i]
            self.e2e[i] = request.done_s - arrival + self.rtt_s[i]

    def _endpoints(self, ready: list[_Replica]) -> list[Endpoint]:
        speed = self.setup.speed
        return [
            Endpoint(
                r.replica_id,
                r.region,
                r.queue.in_flight,
                len(r.queue.queue),
                speed.max_batch,
                speed.prefill_tokens_per_s,
                r.queue.step_s(),
                r.queue.recent_latency_s,
                r.queue.prefill_backlog_s(),
                r.queue.kv_free_tokens(),
            )
            for r in ready
        ]

    def _dispatch(self, i: int, now_s: float, ready: list[_Replica]) -> None:
        request = InferenceRequest(
            self.clients[i], int(self.trace.context_tokens[i]), int(self.trace.generated_tokens[i])
        )
        choice = self.balancer.pick(request, self._endpoints(ready))
        replica = next(r for r in ready if r.replica_id == choice.endpoint.endpoint_id)
        self.spilled += choice.spilled
        self.rtt_s[i] = self.rtt(request.client_region, replica.region) / 1000
        job = Request(i, now_s, request.context_tokens, request.generated_tokens)
        self._record(replica.queue.submit(job, now_s))

    def _advance_all(self, now_s: float) -> None:
        for replica in self.replicas:
            if replica.released_s == math.inf:
                self._record(replica.queue.advance(now_s))
                if replica.draining and replica.queue.outstanding == 0:
                    replica.released_s = now_s

    def _flush_gateway(self, now_s: float) -> None:
        ready = self._ready(now_s)
        while self.gateway and ready:
            i = self.gateway.popleft()
            if now_s - float(self.trace.offset_s[i]) <= self.setup.gateway_timeout_s:
                self._dispatch(i, now_s, ready)

    # -- the loop -------------------------------------------------------------------------------------
    def _kv_product(self, arrived: list[int]) -> float:
        if not arrived:
            return 0.0
        c, g = self.trace.context_tokens[arrived], self.trace.generated_tokens[arrived]
        return float(np.mean((c + g) * np.maximum(0, g - 1)))

    def _tick(self, now_s: float, last_tick_s: float) -> None:
        self._advance_all(now_s)
        self._flush_gateway(now_s)
        active = self._active()
        ready = [r for r in active if r.ready_s <= now_s]
        arrived = self._arrived_in_tick
        in_replicas = sum(r.queue.outstanding for r in self.replicas if r.released_s == math.inf)
        queued = sum(len(r.queue.queue) for r in self.replicas if r.released_s == math.inf)
        seen = ScalerInputs(
            now_s=now_s,
            ready=len(ready),
            starting=len(active) - len(ready),
            concurrency=float(in_replicas + len(self.gateway)),
            queued=queued + len(self.gateway),
            arrivals=len(arrived),
            interval_s=now_s - last_tick_s,
            mean_context=float(np.mean(self.trace.context_tokens[arrived])) if arrived else 0.0,
            mean_generated=float(np.mean(self.trace.generated_tokens[arrived])) if arrived else 0.0,
            mean_kv_product=self._kv_product(arrived),
        )
        decision = self.autoscaler.decide(seen)
        if decision.desired != decision.current and now_s >= self.setup.warmup_s:
            self.decisions.append(decision)
            self._scale(decision.desired, now_s)
        self.timeline.append((now_s, len(ready), len(active) - len(ready), len(arrived)))
        self._arrived_in_tick = []

    def run(self) -> SimResult:
        for region, count in apportion(
            self.setup.initial_replicas, self.setup.region_shares, self.setup.spread
        ).items():
            for _ in range(count):
                self._order(region, 0.0, warm=True)
        offsets = self.trace.offset_s
        n = len(offsets)
        i, next_tick, last_tick = 0, self.setup.tick_s, 0.0
        # After the last arrival the loop goes on only while requests wait at the gateway for a replica.
        give_up = self.end_s + self.setup.gateway_timeout_s
        while i < n or (self.gateway and next_tick <= give_up):
            arrival = float(offsets[i]) if i < n else math.inf
            if self.gateway:
                # Requests waiting at the gateway go out the moment a replica becomes ready.
                ready_at = min((r.ready_s for r in self._active() if r.ready_s > last_tick), default=math.inf)
                if ready_at <= min(arrival, next_tick):
                    self._advance_all(ready_at)
                    self._flush_gateway(ready_at)
            if next_tick <= arrival:
                self._tick(next_tick, last_tick)
                last_tick, next_tick = next_tick, next_tick + self.setup.tick_s
                continue
            self._advance_all(arrival)
            ready = self._ready(arrival)
            self._arrived_in_tick.append(i)
            if ready:
                self._dispatch(i, arrival, ready)
            else:
                self.gateway.append(i)
            i += 1
        self._advance_all(math.inf)
        return self._result()

    def _result(self) -> SimResult:
        served = ~np.isnan(self.e2e)
        targets = e2e_target_s(self.setup.ttft_s, self.setup.tpot_s, self.trace.generated_tokens)
        with np.errstate(invalid="ignore"):
            met = served & (self.ttft <= self.setup.ttft_s) & (self.e2e <= targets)
        gpu_seconds = sum(
            max(0.0, min(r.released_s, self.end_s) - r.ordered_s) * self.setup.gpus_per_replica
            for r in self.replicas
        )
        return SimResult(
            autoscaler=self.autoscaler.name,
            balancer=self.balancer.name,
            requests=len(self.trace),
            served=int(served.sum()),
            dropped=int((~served).sum()),
            slo_met=int(met.sum()),
            ttft_s=self.ttft,
            e2e_s=self.e2e,
            met=met,
            spilled=self.spilled,
            gpu_seconds=gpu_seconds,
            scale_events=len(self.decisions),
            cold_starts=self.cold_starts,
            timeline=self.timeline,
            decisions=self.decisions,
        )
