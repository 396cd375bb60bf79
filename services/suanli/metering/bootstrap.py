"""The one place metering's adapters are chosen and wired: clock, device catalogue, gauges, retry policy."""

from __future__ import annotations

from suanli.bus.metrics import BusMetrics
from suanli.bus.retry import SERVICE_RETRY, RetryPolicy
from suanli.clock import MillisClock, system_ms
from suanli.metering.adapters.metrics import MeteringMetrics, TaskTableCounters
from suanli.metering.domain import MeteringPolicy
from suanli.metering.entrypoints.app import MeteringApp
from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.metering.service_layer.metering import Metering
from suanli.resources import DeviceCatalogue, default_catalogue


def metering_service(
    settings: MeteringSettings,
    *,
    clock: MillisClock = system_ms,
    catalogue: DeviceCatalogue | None = None,
) -> Metering:
    return Metering(
        clock=clock,
        catalogue=catalogue or default_catalogue(),
        policy=MeteringPolicy(republish_after_ms=int(settings.republish_s * 1000)),
        lost_after=settings.lost_after,
        task_retention_ms=int(settings.task_retention_s * 1000),
        counters=TaskTableCounters(),
    )


def metering_app(
    settings: MeteringSettings,
    *,
    clock: MillisClock = system_ms,
    catalogue: DeviceCatalogue | None = None,
    retry: RetryPolicy | None = None,
) -> MeteringApp:
    """The faust app running metering's use cases over its tables and topics."""
    return MeteringApp(
        settings,
        metering_service(settings, clock=clock, catalogue=catalogue),
        gauges=MeteringMetrics(),
        # The bus's own policy: metering retries and dead-letters as every EventConsumer does.
        retry=retry or SERVICE_RETRY,
        bus_metrics=BusMetrics(settings.group_id),
    )
