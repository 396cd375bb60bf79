"""Named runs: the baselines (static at the peak minute, static at the mean, KPA-like) and ours.

- `static-peak`: the smallest static count whose requests arriving in the trace's busiest minute meet the
  SLO at >= `PEAK_ATTAINMENT` (found by simulating counts upward from the capacity model's estimate).
- `static-mean`: that count scaled by mean minute / peak minute, rounded up: sized for the mean.
- `kpa`: the KPA-like autoscaler (Knative defaults) at the spec's target concurrency per replica.
- `slo` (ours): forecast + queueing model of the replica sized for the SLO.

`right_sized` weighs the GPU shares a replica could have (sizing.py) for the sizes of the trace's first
minutes; the benchmark runs every baseline and ours again at the best one, so a right-sized ours is compared
with baselines of the same replica as well as with the spec's.

Autoscaled runs start warm with the static-mean count (the service was running before the trace began).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from suanli.inference.setup import Service, normalised
from suanli.inference.simulator import Autoscaler, SimResult, SimSetup, Simulation, make_balancer
from suanli.resources import default_catalogue
from suanli.resources.network import measured_network
from suanli.routing.domain.balancing import RttMs, measured_rtt
from suanli.serving.domain.autoscaling import (
    Bounds,
    Fixed,
    KpaAutoscaler,
    KpaConfig,
    SloAutoscaler,
    SloScalerConfig,
)
from suanli.serving.domain.capacity import slo_capacity
from suanli.serving.domain.regions import nearest_shares
from suanli.serving.domain.sizing import ShareOption, right_size
from suanli.serving.domain.trace import Trace

PEAK_ATTAINMENT = 0.99
RIGHT_SIZE_HORIZON_S = 600.0  # the trace's first 10 minutes size a right-sized replica
AUTOSCALERS = ("static-peak", "static-mean", "kpa", "slo")


@dataclass(frozen=True, slots=True)
class Scenario:
    service: Service
    trace: Trace
    clients: tuple[str, ...]
    rtt: RttMs
    setup: SimSetup
    seed: int


def scenario(service: Service, trace: Trace, client_weights: Mapping[str, float], seed: int) -> Scenario:
    """Clients drawn for every request (seeded), demand shares of the service's regions, the base setup."""
    network = measured_network()
    rtt = measured_rtt(network)
    weights = normalised(client_weights)
    rng = np.random.default_rng(seed)
    regions = list(weights)
    clients = tuple(str(r) for r in rng.choice(regions, size=len(trace), p=[weights[r] for r in regions]))
    spec = service.spec
    shares = nearest_shares(weights, spec.regions, rtt)
    spread = len(spec.regions) if spec.spread != "none" else 1
    setup = SimSetup(
        speed=service.speed,
        gpus_per_replica=spec.gpus,
        regions=tuple(spec.regions),
        region_shares=shares,
        ttft_s=service.ttft_s,
        tpot_s=service.tpot_s,
        cold_start_s=spec.cold_start_s,
        initial_replicas=max(spec.min_replicas, 1),
        spread=spread,
    )
    return Scenario(service, trace, clients, rtt, setup, seed)


def run(sc: Scenario, autoscaler: Autoscaler, balancer: str, initial: int) -> SimResult:
    rng = np.random.default_rng(sc.seed + 1)
    setup = replace(sc.setup, initial_replicas=initial)
    sim = Simulation(setup, sc.trace, sc.clients, autoscaler, make_balancer(balancer, sc.rtt, rng), sc.rtt)
    return sim.run()


def right_sized(
    service: Service, trace: Trace, horizon_s: float = RIGHT_SIZE_HORIZON_S
) -> tuple[ShareOption, ...]:
    """The GPU shares for the service's model, best per GPU first, for the sizes of the first `horizon_s`.

    Only the start of the trace is used: what a deployment would know of its traffic when it is sized.
    """
    spec = service.spec
    first = float(trace.offset_s[0])
    early = trace.window(first, first + horizon_s)
    context = early.context_tokens.astype(np.float64)
    generated = early.generated_tokens.astype(np.float64)
    return right_size(
        spec.shape,
        default_catalogue().lookup(spec.gpu_model),
        spec.max_batch,
        float(context.mean()),
        float(generated.mean()),
        service.ttft_s,
        service.tpot_s,
        float(np.mean((context + generated) * np.maximum(0.0, generated - 1))),
    )


def peak_minute(trace: Trace) -> tuple[int, int]:
    """(index, requests) of the busiest whole minute."""
    counts = trace.per_minute()
    index = int(np.argmax(counts))
    return index, int(counts[index])


def _peak_attainment(result: SimResult, trace: Trace, minute: int) -> float:
    window = (trace.offset_s >= minute * 60) & (trace.offset_s < (minute + 1) * 60)
    return float(result.met[window].mean()) if window.any() else 1.0


def size_static_peak(sc: Scenario, balancer: str) -> tuple[int, SimResult]:
    """The smallest static count meeting the SLO for >= PEAK_ATTAINMENT of the peak minute's requests."""
    spec = sc.service.spec
    minute, count = peak_minute(sc.trace)
    capacity = slo_capacity(
        sc.service.speed,
        float(sc.trace.context_tokens.mean()),
        float(sc.trace.generated_tokens.mean()),
        sc.setup.ttft_s,
        sc.setup.tpot_s,
        1.0,
    )
    low = max(1, spec.min_replicas)
    n = max(low, min(spec.max_replicas, math.floor(count / 60 / capacity) if capacity > 0 else low))

    def attempt(replicas: int) -> tuple[bool, SimResult]:
        result = run(sc, Fixed(replicas, "static-peak"), balancer, replicas)
        return _peak_attainment(result, sc.trace, minute) >= PEAK_ATTAINMENT, result

    met, result = attempt(n)
    if met:  # the estimate was enough: step down while fewer still meet it
        while n > low:
            fewer_met, fewer = attempt(n - 1)
            if not fewer_met:
                break
            n, result = n - 1, fewer
        return n, result
    while not met and n < spec.max_replicas:
        n += 1
        met, result = attempt(n)
    return n, result


def static_mean_count(sc: Scenario, peak_count: int) -> int:
    counts = sc.trace.per_minute()
    whole = counts[:-1] if len(counts) > 1 else counts  # the last minute is partial
    return max(1, math.ceil(peak_count * float(whole.mean()) / float(whole.max())))


def autoscaler_for(name: str, sc: Scenario, kpa_target: float | None = None) -> Autoscaler:
    spec = sc.service.spec
    bounds = Bounds(spec.min_replicas, spec.max_replicas, spec.scale_to_zero)
    makers: dict[str, Callable[[], Autoscaler]] = {
        "kpa": lambda: KpaAutoscaler(
            KpaConfig(target_concurrency=kpa_target or spec.target.concurrency or spec.max_batch), bounds
        ),
        "slo": lambda: SloAutoscaler(
            SloScalerConfig(ttft_s=sc.setup.ttft_s, tpot_s=sc.setup.tpot_s, cold_start_s=spec.cold_start_s),
            sc.service.speed,
            bounds,
        ),
    }
    if name not in makers:
        raise ValueError(f"unknown autoscaler {name!r}; known: {', '.join(makers)}")
    return makers[name]()


@dataclass(frozen=True, slots=True)
class Comparison:
    peak_replicas: int
    mean_replicas: int
    results: dict[str, SimResult]  # label -> result


def compare(
    sc: Scenario, balancer: str, autoscalers: tuple[str, ...], kpa_targets: tuple[float, ...] = ()
) -> Comparison:
    """Every named autoscaler with one balancer; static-peak is always sized (the others are relative)."""
    peak, peak_result = size_static_peak(sc, balancer)
    mean = static_mean_count(sc, peak)
    results: dict[str, SimResult] = {}
    for name in autoscalers:
        if name == "static-peak":
            results[name] = peak_result
        elif name == "static-mean":
            results[name] = run(sc, Fixed(mean, "static-mean"), balancer, mean)
        elif name == "kpa" and kpa_targets:
            for target in kpa_targets:
                results[f"kpa@{target:g}"] = run(sc, autoscaler_for("kpa", sc, target), balancer, mean)
        else:
            results[name] = run(sc, autoscaler_for(name, sc), balancer, mean)
    return Comparison(peak, mean, results)
