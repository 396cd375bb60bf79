"""The spec's autoscaling block, and the controller over the in-memory adapters with a manual clock:
a burst scales up (reason autoscaler:kpa), the stable window past it scales down, decisions are kept
(the last N that changed the count, the latest hold)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from suanli.clock import ManualClock
from suanli.contracts import decode
from suanli.contracts.load import LoadView
from suanli.resources.catalogue import default_catalogue
from suanli.serving.adapters.memory import InMemoryServing
from suanli.serving.domain.service import ReplicaPolicy
from suanli.serving.domain.spec import ServiceSpecError, validate_service
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.serving.service_layer.autoscaler import PRINCIPAL, AutoscalerController
from suanli.serving.service_layer.serving import ServingService
from suanli.serving.testing import replica_report
from suanli.settings import SettingsError

SPEC: dict[str, Any] = {
    "name": "chat",
    "model": "llama-2-7b",
    "resources": {"gpu": 0.5, "gpu_models": ["A100 80GB SXM"]},
    "min_replicas": 1,
    "max_replicas": 4,
    "target": {"concurrency": 4},
    "autoscaling": {"policy": "kpa", "stable_window_s": 10, "panic_window_s": 4},
}


def _problems(**changes: Any) -> tuple[str, ...]:
    with pytest.raises(ServiceSpecError) as refused:
        validate_service({**SPEC, **changes}, default_catalogue())
    return refused.value.problems


def test_the_autoscaling_block_is_checked_with_precise_errors() -> None:
    assert validate_service(SPEC, default_catalogue())[0].autoscaling.policy == "kpa"
    without = {k: v for k, v in SPEC.items() if k != "autoscaling"}
    assert validate_service(without, default_catalogue())[0].autoscaling.policy == "none"
    assert _problems(autoscaling={"policy": "hpa"}) == (
        "autoscaling.policy: must be one of 'none', 'kpa', 'slo' (got 'hpa')",
    )
    assert _problems(autoscaling={"policy": "kpa", "drain_s": 5}) == (
        "autoscaling: drain_s is not a setting of policy kpa",
    )
    assert _problems(autoscaling={"policy": "kpa", "stable_window_s": 0}) == (
        "autoscaling: stable_window_s must be above 0 and at most 3600 (got 0.0)",
    )
    assert _problems(autoscaling={"policy": "kpa", "stable_window_s": 5, "panic_window_s": 6}) == (
        "autoscaling: panic_window_s (6.0) must be at most stable_window_s (5.0)",
    )
    assert _problems(autoscaling={"policy": "kpa", "max_scale_down_rate": 1}) == (
        "autoscaling: max_scale_down_rate must be above 1 (got 1.0)",
    )
    slo = _problems(autoscaling={"policy": "slo"})
    assert slo == ("spec: autoscaling.policy slo needs a latency SLO (target.ttft_ms and target.tpot_ms)",), (
        slo
    )


async def test_a_burst_scales_up_and_the_stable_window_after_it_scales_down() -> None:
    clock = ManualClock(datetime(2026, 12, 2, tzinfo=UTC))
    ids = itertools.count(1)
    store = InMemoryServing(clock, lambda: uuid.UUID(int=next(ids)))
    serving = ServingService(default_catalogue(), ReplicaPolicy(), lambda: "svc-1")
    async with store.begin() as unit:
        await serving.create(unit, "acme", dict(SPEC), 0, "alice@acme")
    loads = LoadView()
    controller = AutoscalerController(serving, store, store, loads, clock.now, tick_s=2.0, keep=2)

    async def tick(in_flight: int) -> None:
        clock.advance(timedelta(seconds=2))
        loads.report(replica_report("svc-1", "svc-1-r1", clock.now(), in_flight=in_flight), clock.now())
        await controller.tick()

    await tick(16)  # 16 in flight on one replica: panic, ceil(16 / (4 x 0.7)) = 6, at most 4
    stored = await store.get("acme", "chat")
    assert stored is not None and stored.service.desired == 4
    [up] = await store.decisions("svc-1", 10)
    assert (up.from_replicas, up.decision.desired, up.changed) == (1, 4, True)
    assert up.decision.reason.startswith("panic")
    assert (up.decision.inputs.ready, up.decision.inputs.starting, up.decision.inputs.concurrency) == (
        1,
        0,
        16,
    )

    events = [decode(r.value) for r in await store.store.pending_outbox(1000)]
    scaled = [r for name, r in events if name == "ServiceScaled"]
    assert [(r["to_replicas"], r["reason"], r["principal"]) for r in scaled][-1] == (
        4,
        "autoscaler:kpa",
        PRINCIPAL,
    )

    for _ in range(4):  # quiet, but within a stable window of the panic: held at 4, the latest hold kept
        await tick(0)
    assert (await store.get("acme", "chat")).service.desired == 4  # type: ignore[union-attr]
    kept = await store.decisions("svc-1", 10)
    assert [(d.changed, d.decision.desired) for d in kept] == [(False, 4), (True, 4)]

    for _ in range(3):
        await tick(0)
    assert (await store.get("acme", "chat")).service.desired == 1  # type: ignore[union-attr]
    kept = await store.decisions("svc-1", 10)
    assert [(d.changed, d.from_replicas, d.decision.desired) for d in kept][:2] == [
        (False, 1, 1),
        (True, 4, 1),
    ]
    assert sum(d.changed for d in kept) == 2  # keep=2: the older change is dropped once a third comes


def test_the_lease_must_outlive_two_ticks() -> None:
    with pytest.raises(SettingsError) as refused:
        ServingSettings.load(
            {}, kafka_bootstrap="b:9092", pg_dsn="postgresql://x", autoscaler_tick_s=2, autoscaler_lease_s=3
        )
    assert "autoscaler_lease_s (3.0) must be at least 2 x autoscaler_tick_s (2.0)" in str(refused.value)
