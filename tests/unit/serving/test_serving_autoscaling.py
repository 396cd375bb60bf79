"""Autoscaler decisions on synthetic load: KPA-like stable and panic modes, ours sized for the SLO."""

from __future__ import annotations

import math

import pytest

from suanli.replica.service_time import ReplicaSpeed
from suanli.serving.domain.autoscaling import (
    Bounds,
    Fixed,
    KpaAutoscaler,
    KpaConfig,
    ScalerInputs,
    SloAutoscaler,
    SloScalerConfig,
)
from suanli.serving.domain.capacity import operating_point, slo_capacity

TICK = 2.0
SPEED = ReplicaSpeed(
    prefill_tokens_per_s=3000.0,
    weight_read_s=0.04,
    kv_read_s_per_token=1.3e-6,
    compute_s_per_token=3.3e-4,
    kv_capacity_tokens=15_000,
    max_batch=16,
)


def seen(
    t: float, ready: int, concurrency: float, arrivals: int = 0, starting: int = 0, queued: int = 0
) -> ScalerInputs:
    return ScalerInputs(
        now_s=t,
        ready=ready,
        starting=starting,
        concurrency=concurrency,
        queued=queued,
        arrivals=arrivals,
        interval_s=TICK,
        mean_context=1000.0,
        mean_generated=200.0,
        mean_kv_product=1200.0 * 199 * 2,
    )


def kpa(target: float = 10, **bounds: object) -> KpaAutoscaler:
    return KpaAutoscaler(
        KpaConfig(target_concurrency=target), Bounds(**{"min_replicas": 1, "max_replicas": 100, **bounds})
    )  # type: ignore[arg-type]


def test_kpa_stable_mode_divides_the_60s_mean_by_target_times_utilisation() -> None:
    scaler = kpa()
    decision = None
    for k in range(1, 31):
        decision = scaler.decide(seen(k * TICK, ready=4, concurrency=28.0))
    assert decision is not None
    assert decision.desired == 4  # 28 / (10 x 0.7) = 4
    assert dict(decision.model)["panic"] == 0.0
    assert decision.reason == "stable window"


def test_kpa_panics_on_a_burst_and_does_not_scale_down_until_a_stable_window_passes() -> None:
    scaler = kpa()
    for k in range(1, 31):
        scaler.decide(seen(k * TICK, ready=2, concurrency=14.0))
    # A burst: 6 s at 10x the load. The panic window asks for 20 replicas = 1000 % of 2 ready.
    burst = [scaler.decide(seen(60 + k * TICK, ready=2, concurrency=140.0)) for k in range(1, 4)]
    assert burst[-1].desired == 20
    assert dict(burst[-1].model)["panic"] == 1.0
    assert burst[-1].reason.startswith("panic")
    # Load gone, 20 replicas up: panic holds the count (no scale-down) for the stable window.
    calm = [scaler.decide(seen(66 + k * TICK, ready=20, concurrency=14.0)) for k in range(1, 25)]
    assert all(d.desired >= 20 for d in calm[:20])
    later = [scaler.decide(seen(120 + k * TICK, ready=20, concurrency=14.0)) for k in range(1, 40)]
    assert later[-1].desired < 20
    assert later[-1].desired >= 10  # max-scale-down-rate 2: at most halve per decision


def test_kpa_scale_up_rate_limit_and_bounds() -> None:
    scaler = KpaAutoscaler(KpaConfig(target_concurrency=1, max_scale_up_rate=2.0), Bounds(1, 5))
    decision = scaler.decide(seen(TICK, ready=1, concurrency=100.0))
    assert decision.desired == 2  # twice the ready count, not 143
    clamp = KpaAutoscaler(KpaConfig(target_concurrency=1), Bounds(1, 5)).decide(seen(TICK, 1, 100.0))
    assert clamp.desired == 5


def test_kpa_scales_to_zero_only_after_the_grace() -> None:
    scaler = kpa(min_replicas=0, scale_to_zero=True)
    scaler.decide(seen(TICK, ready=1, concurrency=1.0, arrivals=1))
    quiet = [scaler.decide(seen(TICK + k * TICK, ready=1, concurrency=0.0)) for k in range(1, 60)]
    zero_at = next(d.at_s for d in quiet if d.desired == 0)
    assert zero_at - TICK >= 60 + 30


def slo(**overrides: float) -> SloAutoscaler:
    config = SloScalerConfig(ttft_s=2.0, tpot_s=0.1, cold_start_s=60.0, **overrides)
    return SloAutoscaler(config, SPEED, Bounds(1, 200))


def test_ours_sizes_for_the_forecast_rate_over_the_slo_capacity() -> None:
    scaler = slo(headroom_z=0.0)
    capacity = slo_capacity(SPEED, 1000.0, 200.0, 2.0, 0.1, 1.0, 1200.0 * 199 * 2)
    decision = None
    for k in range(1, 61):  # 4 requests/s steady
        decision = scaler.decide(seen(k * TICK, ready=8, concurrency=0.0, arrivals=8))
    assert decision is not None
    figures = dict(decision.model)
    assert figures["rate"] == pytest.approx(4.0)
    assert figures["planned_rate"] == pytest.approx(4.0)
    assert figures["replica_capacity"] == pytest.approx(capacity)
    assert decision.desired == math.ceil(4.0 / capacity)
    assert "forecast / SLO capacity" in decision.reason


def test_ours_adds_poisson_headroom_to_the_forecast() -> None:
    scaler = slo()  # the default: one standard deviation of the count in 30 s
    capacity = slo_capacity(SPEED, 1000.0, 200.0, 2.0, 0.1, 1.0, 1200.0 * 199 * 2)
    decision = None
    for k in range(1, 61):
        decision = scaler.decide(seen(k * TICK, ready=8, concurrency=0.0, arrivals=8))
    assert decision is not None
    planned = 4.0 + math.sqrt(4.0 / 30.0)
    assert dict(decision.model)["planned_rate"] == pytest.approx(planned)
    assert decision.desired == math.ceil(planned / capacity)


def test_ours_scales_up_at_once_and_down_only_after_the_down_window() -> None:
    scaler = slo()
    for k in range(1, 31):
        scaler.decide(seen(k * TICK, ready=8, concurrency=0.0, arrivals=8))
    up = scaler.decide(seen(62, ready=8, concurrency=0.0, arrivals=60))  # 30/s in one tick
    assert up.desired > 8 and up.reason.startswith("up")
    ordered = up.desired
    calm = [
        scaler.decide(seen(62 + k * TICK, ready=ordered, concurrency=0.0, arrivals=8)) for k in range(1, 150)
    ]
    held = [d for d in calm if d.at_s < 62 + 100]
    assert all(d.desired >= ordered for d in held)  # slow down: nothing released within the 120 s window
    assert calm[-1].desired < ordered
    # The first release comes a whole down window after the last tick that still needed `ordered`.
    last_needed = max(
        d.at_s
        for d in [up, *calm]
        if max(dict(d.model)["needed_up"], dict(d.model)["needed_down"]) >= ordered
    )
    first_down = next(d.at_s for d in calm if d.desired < ordered)
    assert first_down >= last_needed + 120


def test_ours_counts_the_backlog_and_the_concurrency_seen() -> None:
    quiet = slo().decide(seen(TICK, ready=2, concurrency=0.0, arrivals=2))
    busy = slo().decide(seen(TICK, ready=2, concurrency=200.0, arrivals=2, queued=150))
    figures = dict(busy.model)
    assert figures["backlog"] > 0 and figures["feedback"] > figures["forward"]
    assert busy.desired > quiet.desired


def test_every_decision_explains_itself() -> None:
    decision = slo().decide(seen(TICK, ready=2, concurrency=3.0, arrivals=4, starting=1))
    text = decision.explain()
    assert text.startswith("t=2s slo: 3 -> ")
    for figure in ("rate=", "replica_capacity=", "needed_up=", "held="):
        assert figure in text
    assert decision.inputs.starting == 1
    assert Fixed(7).decide(seen(TICK, ready=5, concurrency=0.0)).desired == 7


def test_the_capacity_model_meets_the_slo_at_its_answer_and_not_beyond() -> None:
    capacity = slo_capacity(SPEED, 1000.0, 200.0, 2.0, 0.1, 1.0)
    inside = operating_point(SPEED, capacity * 0.99, 1000.0, 200.0)
    beyond = operating_point(SPEED, capacity * 1.05, 1000.0, 200.0)
    assert inside is not None and inside.ttft_s <= 2.0 and inside.tpot_s <= 0.1
    assert inside.kv_tokens <= SPEED.kv_capacity_tokens and inside.batch <= SPEED.max_batch
    assert (
        beyond is None
        or beyond.kv_tokens > SPEED.kv_capacity_tokens
        or beyond.tpot_s > 0.1
        or beyond.batch > 16
    )
    # A tighter SLO or heavier requests give less.
    assert slo_capacity(SPEED, 1000.0, 200.0, 2.0, 0.05, 1.0) < capacity
    assert slo_capacity(SPEED, 1000.0, 200.0, 2.0, 0.1, 1.0, 1200.0 * 199 * 2) < capacity
    assert slo_capacity(SPEED, 1000.0, 200.0, 2.0, 0.04, 1.0) == 0.0  # one step is 42 ms: TPOT unreachable
