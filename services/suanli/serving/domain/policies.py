"""The autoscaler a service's spec asks for (`autoscaling.policy`), configured from the spec.

Settings the spec leaves out keep the autoscaler's own defaults (`KpaConfig`, `SloScalerConfig`).
"""

from __future__ import annotations

from typing import Any, Protocol

from suanli.replica.service_time import ReplicaSpeed
from suanli.serving.domain.autoscaling import (
    Bounds,
    KpaAutoscaler,
    KpaConfig,
    ScaleDecision,
    ScalerInputs,
    SloAutoscaler,
    SloScalerConfig,
)
from suanli.serving.domain.spec import KPA_ONLY, SLO_ONLY, ServiceSpec


class Autoscaler(Protocol):
    @property
    def name(self) -> str: ...

    def decide(self, seen: ScalerInputs) -> ScaleDecision: ...


def _given(spec: ServiceSpec, names: tuple[str, ...]) -> dict[str, Any]:
    return {n: getattr(spec.autoscaling, n) for n in names if getattr(spec.autoscaling, n) is not None}


def autoscaler_for(spec: ServiceSpec, speed: ReplicaSpeed) -> Autoscaler | None:
    """A fresh autoscaler for the spec's policy; None for `none` (the count is set by hand)."""
    bounds = Bounds(spec.min_replicas, spec.max_replicas, spec.scale_to_zero)
    policy = spec.autoscaling.policy
    if policy == "kpa" and spec.target.concurrency is not None:
        kpa = KpaConfig(target_concurrency=spec.target.concurrency, **_given(spec, KPA_ONLY))
        return KpaAutoscaler(kpa, bounds)
    if policy == "slo" and spec.target.ttft_ms is not None and spec.target.tpot_ms is not None:
        slo = SloScalerConfig(
            ttft_s=spec.target.ttft_ms / 1000,
            tpot_s=spec.target.tpot_ms / 1000,
            cold_start_s=spec.cold_start_s,
            **_given(spec, SLO_ONLY),
        )
        return SloAutoscaler(slo, speed, bounds)
    return None
