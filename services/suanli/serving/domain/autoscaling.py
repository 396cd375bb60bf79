"""Autoscalers: how many replicas a service should have now, each decision a record that explains itself.

Both are called on a fixed tick with what the load view shows (`ScalerInputs`) and answer a
`ScaleDecision`: the inputs, the model's intermediate figures, the desired count and a one-line reason.

`KpaAutoscaler` is Knative's Pod Autoscaler as documented (knative.dev, "Additional autoscaling
configuration for Knative Pod Autoscaler" and the `config-autoscaler` defaults): requests in flight averaged
over a 60 s stable window and a 6 s panic window (10 %), divided by target concurrency x target utilisation
(70 %); panic when the panic window asks for at least 200 % of the ready replicas, and no scale-down until a
stable window has passed without panic; the change per tick bounded by max-scale-up-rate (1000) and
max-scale-down-rate (2); scale to zero only after a stable window without traffic plus the 30 s grace.

`SloAutoscaler` (ours) sizes for the latency SLO instead of a concurrency proxy: it forecasts the arrival
rate one cold start ahead (a 30 s EWMA plus the trend of the last two minutes, plus Poisson headroom),
divides by what one replica takes within the SLO (capacity.py, from the replica's speed and the sizes of
recent requests), corrects that with the concurrency it sees divided by the model's batch at capacity,
adds replicas to drain a backlog within `drain_s`, and scales up at once but down only to the largest count
needed over the last `down_window_s` (two cold starts: a replica released now would take a cold start to
come back), judged on both a fast and a slow view of rate and sizes.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from suanli.replica.service_time import ReplicaSpeed
from suanli.serving.domain.capacity import operating_point, slo_capacity

_IDLE_RATE = 1e-3  # requests/s below which a service counts as idle


@dataclass(frozen=True, slots=True)
class ScalerInputs:
    """The load view at one tick."""

    now_s: float
    ready: int  # replicas serving
    starting: int  # replicas ordered, not yet ready (cold start)
    concurrency: float  # requests in flight or waiting, service-wide (Knative's metric)
    queued: int  # of those, waiting for a batch slot or a replica
    arrivals: int  # requests arrived since the previous tick
    interval_s: float  # since the previous tick
    mean_context: float  # tokens, recent requests
    mean_generated: float
    mean_kv_product: float = 0.0  # E[(context + generated) x (generated - 1)] of the same requests


@dataclass(frozen=True, slots=True)
class Bounds:
    min_replicas: int
    max_replicas: int
    scale_to_zero: bool = False

    def clamp(self, n: int) -> int:
        low = 0 if self.scale_to_zero else max(1, self.min_replicas)
        return max(low, self.min_replicas, min(self.max_replicas, n))


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """One decision: what was seen, what the model computed, what was decided and why."""

    at_s: float
    autoscaler: str
    current: int  # ready + starting
    desired: int
    reason: str
    inputs: ScalerInputs
    model: tuple[tuple[str, float], ...]

    @property
    def change(self) -> int:
        return self.desired - self.current

    def explain(self) -> str:
        figures = ", ".join(f"{k}={v:.3g}" for k, v in self.model)
        head = f"t={self.at_s:.0f}s {self.autoscaler}: {self.current} -> {self.desired}"
        return f"{head} ({self.reason}; {figures})"


class _Window:
    """(time, value) samples kept for `span_s`; averages over the most recent part."""

    def __init__(self, span_s: float) -> None:
        self.span_s = span_s
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, t: float, value: float) -> None:
        self.samples.append((t, value))
        while self.samples and self.samples[0][0] <= t - self.span_s:
            self.samples.popleft()

    def mean(self, since_s: float) -> float:
        values = [v for t, v in self.samples if t > since_s]
        return sum(values) / len(values) if values else 0.0

    def quantile(self, q: float) -> float:
        """The `q` quantile of the samples (nearest rank; 1.0 is the maximum)."""
        values = sorted(v for _, v in self.samples)
        if not values:
            return 0.0
        return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


@dataclass(frozen=True, slots=True)
class KpaConfig:
    target_concurrency: float
    target_utilization: float = 0.7
    stable_window_s: float = 60.0
    panic_window_s: float = 6.0
    panic_threshold: float = 2.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    scale_to_zero_grace_s: float = 30.0


class KpaAutoscaler:
    name = "kpa"

    def __init__(self, config: KpaConfig, bounds: Bounds) -> None:
        self.config = config
        self.bounds = bounds
        self._concurrency = _Window(config.stable_window_s)
        self._panic_since: float | None = None
        self._last_traffic_s = 0.0

    def decide(self, seen: ScalerInputs) -> ScaleDecision:
        c = self.config
        now = seen.now_s
        self._concurrency.add(now, seen.concurrency)
        if seen.concurrency > 0 or seen.arrivals > 0:
            self._last_traffic_s = now
        per_replica = c.target_concurrency * c.target_utilization
        stable = self._concurrency.mean(now - c.stable_window_s)
        panic = self._concurrency.mean(now - c.panic_window_s)
        ready = max(1, seen.ready)
        up_limit = math.ceil(ready * c.max_scale_up_rate)
        down_limit = math.floor(ready / c.max_scale_down_rate)
        want_stable = min(up_limit, max(down_limit, math.ceil(stable / per_replica)))
        want_panic = min(up_limit, max(down_limit, math.ceil(panic / per_replica)))
        current = seen.ready + seen.starting
        if want_panic / ready >= c.panic_threshold:
            self._panic_since = now
        elif self._panic_since is not None and now - self._panic_since >= c.stable_window_s:
            self._panic_since = None
        if self._panic_since is not None:
            desired = max(want_panic, current)
            reason = f"panic: the {c.panic_window_s:g} s window asks >= {c.panic_threshold:.0%} of ready"
        else:
            desired, reason = want_stable, "stable window"
        quiet_s = now - self._last_traffic_s
        if (
            desired == 0
            and self.bounds.scale_to_zero
            and quiet_s < c.stable_window_s + c.scale_to_zero_grace_s
        ):
            desired, reason = max(1, min(current, 1)), "no traffic, waiting out the scale-to-zero grace"
        desired = self.bounds.clamp(desired)
        model = (
            ("stable_concurrency", stable),
            ("panic_concurrency", panic),
            ("per_replica_target", per_replica),
            ("want_stable", want_stable),
            ("want_panic", want_panic),
            ("panic", float(self._panic_since is not None)),
        )
        return ScaleDecision(now, self.name, current, desired, reason, seen, model)


@dataclass(frozen=True, slots=True)
class SloScalerConfig:
    ttft_s: float
    tpot_s: float
    cold_start_s: float
    safety: float = 1.0  # size each replica for this share of the SLO (capacity.py)
    # The rate for scaling up. 30 s rather than 10 s: at ~6 requests/s a 10 s EWMA's standard deviation from
    # Poisson noise alone is ~8 % of the rate, and the down window holds the largest count of the last
    # 120 s, so the noise's upper tail was held as replicas (docs/inference.md, "Where the GPU-seconds go").
    fast_half_life_s: float = 30.0
    slow_half_life_s: float = 120.0  # ... and for scaling down
    size_half_life_s: float = 30.0
    # The trend's least-squares window: two cold starts, as the trend is projected one cold start ahead
    # and a slope over a shorter window amplifies noise by that lead.
    trend_window_s: float = 120.0
    # Poisson headroom on the smoothed rate: z standard deviations of the count in `burst_s`, an explicit
    # allowance for bursts in place of the noise the faster EWMA used to add by accident.
    headroom_z: float = 1.0
    burst_s: float = 30.0
    down_window_s: float = 120.0  # two cold starts
    drain_s: float = 15.0  # a backlog is sized to drain within this


def _ewma(old: float | None, new: float, dt: float, half_life: float) -> float:
    if old is None:
        return new
    weight: float = 1 - math.exp(-math.log(2) * dt / half_life)
    return old + weight * (new - old)


class _Sizes:
    """Smoothed request sizes: mean context, mean generated, and E[(c + g)(g - 1)] (capacity.py)."""

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self.context: float | None = None
        self.generated: float | None = None
        self.kv_product: float | None = None

    def add(self, seen: ScalerInputs, dt: float) -> None:
        if not seen.arrivals:
            return
        self.context = _ewma(self.context, seen.mean_context, dt, self.half_life_s)
        self.generated = _ewma(self.generated, seen.mean_generated, dt, self.half_life_s)
        if seen.mean_kv_product > 0:
            self.kv_product = _ewma(self.kv_product, seen.mean_kv_product, dt, self.half_life_s)

    def means(self) -> tuple[float, float, float | None]:
        return max(self.context or 1.0, 1.0), max(self.generated or 1.0, 1.0), self.kv_product


@dataclass(frozen=True, slots=True)
class _Sizing:
    needed: int
    forward: int
    feedback: int
    backlog: int
    capacity: float
    per_replica: float
    reason: str


class SloAutoscaler:
    name = "slo"

    def __init__(self, config: SloScalerConfig, speed: ReplicaSpeed, bounds: Bounds) -> None:
        self.config = config
        self.speed = speed
        self.bounds = bounds
        self._fast_rate: float | None = None
        self._slow_rate: float | None = None
        self._fast_sizes = _Sizes(config.size_half_life_s)
        self._slow_sizes = _Sizes(config.slow_half_life_s)
        self._rates = _Window(config.trend_window_s)
        self._held = _Window(config.down_window_s)

    def _trend(self) -> float:
        """Least-squares slope of the smoothed rate over the trend window (requests/s per s), once full."""
        points = list(self._rates.samples)
        if not points or points[-1][0] - points[0][0] < self.config.trend_window_s / 2:
            return 0.0
        mean_t = sum(t for t, _ in points) / len(points)
        mean_r = sum(r for _, r in points) / len(points)
        var = sum((t - mean_t) ** 2 for t, _ in points)
        return sum((t - mean_t) * (r - mean_r) for t, r in points) / var if var else 0.0

    def _planned(self, rate: float, trend: float) -> float:
        """The rate to size for: `rate` one cold start ahead on `trend`, plus Poisson headroom."""
        ahead = max(rate, rate + trend * (self.config.cold_start_s + 2.0))
        return ahead + self.config.headroom_z * math.sqrt(ahead / self.config.burst_s)

    def _size(self, planned: float, sizes: _Sizes, seen: ScalerInputs) -> _Sizing:
        c = self.config
        context, generated, kv_product = sizes.means()
        capacity = slo_capacity(self.speed, context, generated, c.ttft_s, c.tpot_s, c.safety, kv_product)
        if capacity <= 0:
            top = self.bounds.max_replicas
            return _Sizing(top, top, top, 0, 0.0, 1.0, "one replica cannot meet the SLO even unloaded")
        point = operating_point(self.speed, capacity, context, generated, kv_product)
        per_replica = point.batch if point is not None and point.batch > 0 else 1.0
        forward = math.ceil(planned / capacity)
        # The model works on smoothed sizes; the concurrency seen corrects it when the mix is heavier.
        feedback = math.ceil(seen.concurrency / per_replica)
        backlog = math.ceil(seen.queued / (capacity * c.drain_s)) if seen.queued else 0
        reason = "forecast / SLO capacity" if forward >= feedback else "concurrency / SLO batch"
        if backlog:
            reason += f" + {backlog} for the backlog"
        return _Sizing(
            max(forward, feedback) + backlog, forward, feedback, backlog, capacity, per_replica, reason
        )

    def decide(self, seen: ScalerInputs) -> ScaleDecision:
        c = self.config
        dt = max(seen.interval_s, 1e-9)
        observed = seen.arrivals / dt
        self._fast_rate = _ewma(self._fast_rate, observed, dt, c.fast_half_life_s)
        self._slow_rate = _ewma(self._slow_rate, observed, dt, c.slow_half_life_s)
        self._fast_sizes.add(seen, dt)
        self._slow_sizes.add(seen, dt)
        self._rates.add(seen.now_s, self._fast_rate)
        trend = self._trend()
        planned = self._planned(self._fast_rate, trend)
        up = self._size(planned, self._fast_sizes, seen)
        down = self._size(self._planned(max(self._slow_rate, self._fast_rate), trend), self._slow_sizes, seen)
        current = seen.ready + seen.starting
        if not self._held.samples:
            # Without a down window of history, what runs now counts as needed: no scale-down on start-up.
            self._held.add(seen.now_s - 1e-9, current)
        self._held.add(seen.now_s, max(up.needed, down.needed))
        held = int(self._held.quantile(1.0))
        if up.needed >= current:
            desired = up.needed
            reason = ("up: " if desired > current else "hold: ") + up.reason
        else:
            desired = min(current, held)
            reason = (
                f"down: {down.reason}" if desired < current else f"hold: {held} needed within the down window"
            )
        if self.bounds.scale_to_zero and self._fast_rate < _IDLE_RATE and seen.concurrency == 0:
            desired, reason = 0, "no traffic: scale to zero"
        desired = self.bounds.clamp(desired)
        context, generated, _ = self._fast_sizes.means()
        model = (
            ("rate", self._fast_rate),
            ("slow_rate", self._slow_rate),
            ("trend", trend),
            ("planned_rate", planned),
            ("replica_capacity", up.capacity),
            ("mean_context", context),
            ("mean_generated", generated),
            ("per_replica_concurrency", up.per_replica),
            ("forward", up.forward),
            ("feedback", up.feedback),
            ("backlog", up.backlog),
            ("needed_up", up.needed),
            ("needed_down", down.needed),
            ("held", held),
        )
        return ScaleDecision(seen.now_s, self.name, current, desired, reason, seen, model)


@dataclass(frozen=True, slots=True)
class Fixed:
    """A static replica count: the baselines sized for the peak minute or the mean."""

    replicas: int
    label: str = "static"

    @property
    def name(self) -> str:
        return self.label

    def decide(self, seen: ScalerInputs) -> ScaleDecision:
        current = seen.ready + seen.starting
        return ScaleDecision(
            seen.now_s, self.label, current, self.replicas, "static", seen, (("replicas", self.replicas),)
        )
