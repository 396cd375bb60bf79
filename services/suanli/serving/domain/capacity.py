"""The queueing model of one replica: the highest arrival rate at which it still meets the latency SLO.

For mean request sizes (c context tokens, g generated) and a per-replica arrival rate λ (Poisson):

    p      = prefill_s(c)                                 prefill time of the mean request
    ρ      = λ p                                          share of time the replica prefills (decode stalls)
    W_p    = ρ p / (1 - ρ)                                M/M/1-like wait for the prefill slot
    n      = λ (W_p + p + (g - 1) t / (1 - ρ))            requests in the batch (Little's law) ...
    t      = step_s(n, n (c + g/2))                       ... and the step time at that batch, a fixed point
    TTFT   = W_p + p
    TPOT   = t / (1 - ρ)                                  decode steps stretched by the prefills between them
    K      = λ (E[c + g] (W_p + p) + E[(c + g)(g - 1)] t / (1 - ρ))   KV tokens reserved (Little's law again)

K uses the second moment E[(c + g)(g - 1)]: a request holds its whole reservation for as long as it
decodes, so long generations hold more cache for longer, and with the trace's spread of output lengths
(coefficient of variation ~1) the mean-only product would understate the occupancy about twofold.

The replica meets the SLO at λ when ρ < 1, n <= max_batch, K fits the KV cache, TTFT <= safety x ttft
target and TPOT <= safety x tpot target. `slo_capacity` finds the largest such λ by bisection; a safety
factor below 1 would leave room for requests larger than the mean (the autoscaler uses 1 and corrects
with the concurrency it sees instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.replica.service_time import ReplicaSpeed

_FIXED_POINT_ROUNDS = 30
_BISECTION_ROUNDS = 40


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    arrival_rate: float
    batch: float
    ttft_s: float
    tpot_s: float
    prefill_share: float
    kv_tokens: float  # reserved by the batch: n x (c + g)


def operating_point(
    speed: ReplicaSpeed, rate: float, context: float, generated: float, kv_product: float | None = None
) -> OperatingPoint | None:
    """The steady state at `rate` requests/s of mean sizes; None when prefill saturates.

    `kv_product` is E[(c + g)(g - 1)] of the requests (default: from the means, as if all were equal).
    """
    p = speed.prefill_s(round(context))
    rho = rate * p
    if rho >= 1:
        return None
    wait = rho * p / (1 - rho)
    decode_tokens = max(0.0, generated - 1)
    batch = 1.0
    for _ in range(_FIXED_POINT_ROUNDS):
        step = speed.step_s(max(1, round(batch)), batch * (context + generated / 2))
        batch = rate * (wait + p + decode_tokens * step / (1 - rho))
    step = speed.step_s(max(1, round(batch)), batch * (context + generated / 2))
    product = kv_product if kv_product is not None else (context + generated) * decode_tokens
    kv = rate * ((context + generated) * (wait + p) + product * step / (1 - rho))
    return OperatingPoint(rate, batch, wait + p, step / (1 - rho), rho, kv)


def meets(point: OperatingPoint | None, speed: ReplicaSpeed, ttft_s: float, tpot_s: float) -> bool:
    return (
        point is not None
        and point.batch <= speed.max_batch
        and point.kv_tokens <= speed.kv_capacity_tokens
        and point.ttft_s <= ttft_s
        and point.tpot_s <= tpot_s
    )


def slo_capacity(
    speed: ReplicaSpeed,
    context: float,
    generated: float,
    ttft_s: float,
    tpot_s: float,
    safety: float,
    kv_product: float | None = None,
) -> float:
    """Requests/s one replica takes within `safety` x the SLO (0 when even one request misses it)."""
    ttft, tpot = safety * ttft_s, safety * tpot_s
    high = 1 / speed.prefill_s(max(1, round(context)))
    if not meets(operating_point(speed, 1e-9, context, generated, kv_product), speed, ttft, tpot):
        return 0.0
    low = 0.0
    for _ in range(_BISECTION_ROUNDS):
        mid = (low + high) / 2
        if meets(operating_point(speed, mid, context, generated, kv_product), speed, ttft, tpot):
            low = mid
        else:
            high = mid
    return low
