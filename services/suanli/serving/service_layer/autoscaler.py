"""The live autoscaler: each tick, every autoscaled service sized from its load reports.

For each live service whose spec names a policy (`autoscaling.policy` kpa or slo), the tick builds the
autoscaler's inputs from the service's fresh load reports (`LoadSampler`), asks the service's autoscaler,
and keeps the decision for `ExplainService`. When the desired count differs from the service's, the
service is scaled through the same use case as `ScaleService`, with reason `autoscaler:<policy>` and
principal `system:autoscaler`, in the same transaction as the decision it carries out.

The autoscalers' windows (KPA's stable and panic windows, the SLO autoscaler's EWMAs and down window)
live in this object: a restarted controller starts them afresh, as a Knative autoscaler does; the SLO
autoscaler then scales nothing down before a down window has passed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from suanli.contracts.load import LoadView
from suanli.errors import FailedPrecondition, InvalidArgument, NotFound
from suanli.replica.service_time import replica_speed
from suanli.serving.domain.policies import Autoscaler, autoscaler_for
from suanli.serving.domain.scaler_inputs import LoadSampler
from suanli.serving.domain.service import AUTOSCALER, Service
from suanli.serving.service_layer.live import live_services
from suanli.serving.service_layer.ports import ExplainedDecision, ServingQueries, UnitOfWork
from suanli.serving.service_layer.serving import ServingService

log = logging.getLogger(__name__)

PRINCIPAL = "system:autoscaler"


def scale_reason(policy: str) -> str:
    """ServiceScaled.reason of the autoscaler's scaling: `autoscaler:kpa`, `autoscaler:slo`."""
    return f"{AUTOSCALER}:{policy}"


@dataclass(slots=True)
class _Scaled:
    """One service's autoscaler and its report counters, kept from tick to tick."""

    autoscaler: Autoscaler
    sampler: LoadSampler


class AutoscalerController:
    """`tick()` decides for every autoscaled service once; the caller runs it on its interval."""

    def __init__(
        self,
        serving: ServingService,
        uow: UnitOfWork,
        queries: ServingQueries,
        loads: LoadView,
        now: Callable[[], datetime],
        *,
        tick_s: float,
        keep: int,
    ) -> None:
        self._serving = serving
        self._uow = uow
        self._queries = queries
        self._loads = loads
        self._now = now
        self._tick_s = tick_s
        self._keep = keep
        self._scaled: dict[str, _Scaled] = {}

    def forget(self) -> None:
        """Drop every window and counter: the next tick starts each service's autoscaler afresh."""
        self._scaled.clear()

    async def tick(self) -> list[ExplainedDecision]:
        """One decision per autoscaled service, kept, and carried out where it changes the count.

        A change commits with its scaling, one transaction per service; the holds of the tick commit
        together in one.
        """
        services = [s for s in await live_services(self._queries) if s.spec.autoscaling.policy != "none"]
        for gone in set(self._scaled) - {s.service_id for s in services}:
            del self._scaled[gone]
        decided, held = [], []
        for service in services:
            entry = self._decide(service)
            if entry is None:
                continue
            if not entry.changed:
                held.append(entry)
            elif await self._carry_out(service, entry):
                decided.append(entry)
        if held:
            async with self._uow.begin() as unit:
                await unit.explained(held, self._keep)
        return decided + held

    def _decide(self, service: Service) -> ExplainedDecision | None:
        scaled = self._scaled.get(service.service_id) or self._start(service)
        if scaled is None:
            return None
        now = self._now()
        reports = self._loads.of(service.service_id, now)
        serving = [r.replica_id for r in service.serving_replicas]
        decision = scaled.autoscaler.decide(scaled.sampler.sample(now.timestamp(), reports, serving))
        return ExplainedDecision(service.service_id, now, service.desired, decision)

    async def _carry_out(self, service: Service, entry: ExplainedDecision) -> bool:
        decision = entry.decision
        try:
            async with self._uow.begin() as unit:
                reason = scale_reason(decision.autoscaler)
                await self._serving.scale(
                    unit, service.tenant, service.name, decision.desired, PRINCIPAL, reason
                )
                await unit.explained([entry], self._keep)
        except (NotFound, FailedPrecondition, InvalidArgument) as exc:
            # Deleted, or its name taken again, since it was read: the next tick reads it afresh.
            log.info("autoscaler: %s/%s not scaled: %s", service.tenant, service.name, exc)
            return False
        log.info("autoscaler: %s/%s %s", service.tenant, service.name, decision.explain())
        return True

    def _start(self, service: Service) -> _Scaled | None:
        spec = service.spec
        device = self._serving.catalogue.lookup(spec.gpu_model)
        autoscaler = autoscaler_for(spec, replica_speed(spec.shape, device, spec.gpus, spec.max_batch))
        if autoscaler is None:
            return None
        scaled = _Scaled(autoscaler, LoadSampler(self._tick_s))
        self._scaled[service.service_id] = scaled
        return scaled
