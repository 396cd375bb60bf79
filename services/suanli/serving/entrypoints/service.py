"""The serving process: consumer of the scheduler's topics, outbox relay and gRPC API around the service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

from suanli.auth.server import server_auth
from suanli.bus import SERVICE_RETRY, BrokerWatch, EventPublisher, KeptConsumer, topics
from suanli.clock import Clock, SystemClock
from suanli.contracts.load import LoadView
from suanli.eventstore import PostgresEventStore, ProcessedEventsPruner
from suanli.serving import bootstrap
from suanli.serving.adapters.metrics import MeteredServing, ServingMetrics
from suanli.serving.entrypoints.autoscaler import autoscaling, load_consumer
from suanli.serving.entrypoints.consumer import INPUTS, LOAD, ServingHandler
from suanli.serving.entrypoints.grpc_api import ServingApi, start_server
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.serving.service_layer.live import live_services
from suanli.serving.service_layer.ports import ServingQueries, UnitOfWork
from suanli.serving.service_layer.serving import ServingService
from suanli.telemetry.grpc import with_tracing

log = logging.getLogger(__name__)

# How often the gauges are set from the live services (one read of them all) and the load view.
METRICS_REFRESH_S = 5.0


@dataclass(slots=True)
class RunningServing:
    """Handles tests and the CLI use: the bound gRPC port and the pieces to inspect."""

    grpc_port: int
    store: PostgresEventStore
    queries: ServingQueries
    service: ServingService
    uow: UnitOfWork
    consumer: KeptConsumer
    load_consumer: KeptConsumer


@contextlib.asynccontextmanager
async def running(settings: ServingSettings, clock: Clock | None = None) -> AsyncIterator[RunningServing]:
    """Start everything; on exit stop intake first, then the API and the relay."""
    clock = clock or SystemClock()
    prefix = settings.topic_prefix
    specs = [topics.spec(name) for name in (*INPUTS, LOAD, "services.events", "jobs.commands")]
    # Its first look creates the topics; later ones tell the consumer's keeper that the broker started over.
    watch = BrokerWatch(settings.kafka_bootstrap, specs, prefix=prefix)
    await watch.look()
    async with contextlib.AsyncExitStack() as stack:
        serving = await stack.enter_async_context(bootstrap.bootstrap(settings, clock))
        publisher = await stack.enter_async_context(EventPublisher(settings.kafka_bootstrap))
        await stack.enter_async_context(serving.relay(publisher))
        # Serving owns its processed_events (the consumer's de-duplication records): it prunes them.
        await stack.enter_async_context(ProcessedEventsPruner(serving.store, schema=serving.store.schema))

        loads = LoadView()
        metrics = ServingMetrics()
        uow = MeteredServing(serving.uow, metrics)
        api = ServingApi(serving.queries, uow, serving.service, settings.watch_poll_s, loads, clock.now)
        auth = await stack.enter_async_context(server_auth(settings))
        server, port = await start_server(
            api, settings.listen, with_tracing(() if auth is None else (auth.interceptor,)), settings
        )
        stack.push_async_callback(server.stop, 5.0)

        names = {name: topics.topic_name(name, prefix) for name in INPUTS}
        handler = ServingHandler(serving.service, uow, serving.queries, settings.group, names)

        consumer = await stack.enter_async_context(
            KeptConsumer.of(
                settings.kafka_bootstrap,
                settings.group,
                names.values(),
                handler,
                watch=watch,
                name="serving consumer",
                retry=SERVICE_RETRY,  # database outages ridden out for two minutes, as in every service
                settings=settings.consumer,
                prepare=handler.prepare,
            )
        )
        load_reports = await stack.enter_async_context(
            load_consumer(settings, loads, clock, watch.fork(), metrics.load_reported)
        )
        if settings.autoscaler:  # off: the autoscaler runs apart (`suanli serve serving autoscaler`) or not
            await stack.enter_async_context(autoscaling(serving, loads, settings, metrics))
        if settings.metrics_port is not None:  # no endpoint: nothing would read the gauges
            observing = asyncio.create_task(_observe(serving.queries, loads, clock.now, metrics))
            stack.push_async_callback(_cancelled, observing)
        log.info("serving serving gRPC on port %d, consuming %s", port, ", ".join(names.values()))
        yield RunningServing(
            port, serving.store, serving.queries, serving.service, uow, consumer, load_reports
        )


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _observe(
    queries: ServingQueries, loads: LoadView, now: Callable[[], datetime], metrics: ServingMetrics
) -> None:
    """Set the gauges every `METRICS_REFRESH_S`; a failed read keeps the last values until the next."""
    while True:
        try:
            metrics.observe(await live_services(queries), loads.fresh(now()))
        except Exception as exc:
            log.warning(
                "serving metrics: reading the services failed, retried in %.0fs: %r", METRICS_REFRESH_S, exc
            )
        await asyncio.sleep(METRICS_REFRESH_S)


async def serve(settings: ServingSettings, stop: asyncio.Event) -> None:
    """Run until `stop` is set (SIGTERM/SIGINT in `suanli serve serving`)."""
    async with running(settings):
        await stop.wait()


def main(settings: ServingSettings) -> None:
    """Foreground process: telemetry, SIGTERM/SIGINT → graceful stop."""
    from suanli.serving.entrypoints.foreground import run_foreground

    run_foreground("serving", settings.metrics_port, lambda stop: serve(settings, stop))
