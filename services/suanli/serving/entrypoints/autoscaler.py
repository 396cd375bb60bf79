"""The autoscaler's loop, inside the serving process or as its own (`suanli serve serving autoscaler`).

Every `autoscaler_tick_s` the loop renews (or tries to take) the autoscaler lease and, while it holds
it, runs one tick of `AutoscalerController`. Its own process needs what the controller reads and
writes: serving's store, the load view fed from `services.load`, and a relay for the outbox of its
scalings (the relay's own lease keeps one relay publishing, whichever process runs it). When no
autoscaler runs, services keep their count and routing keeps balancing over the replicas' reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable

from suanli.bus import BrokerWatch, EventPublisher, KeptConsumer, topics
from suanli.clock import Clock, SystemClock, uuid4_factory
from suanli.contracts.load import LoadView
from suanli.eventstore.lease import LeaseLost
from suanli.infra.transient import is_transient
from suanli.serving import bootstrap
from suanli.serving.adapters.lease import AutoscalerLease
from suanli.serving.adapters.metrics import MeteredServing, ServingMetrics
from suanli.serving.entrypoints.consumer import LOAD, LoadHandler
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.serving.service_layer.autoscaler import AutoscalerController

log = logging.getLogger(__name__)


def load_consumer(
    settings: ServingSettings,
    loads: LoadView,
    clock: Clock,
    watch: BrokerWatch,
    counted: Callable[[bool], None] | None = None,
) -> KeptConsumer:
    """The consumer of `services.load` into `loads`, kept running (and replaced when ``watch`` says the
    broker started over).

    Every reader keeps the whole view: its own group, from the newest reports on (a report is full
    state, so the next one is all a new reader needs).
    """
    return KeptConsumer.of(
        settings.kafka_bootstrap,
        f"{settings.group}-load-{uuid4_factory().hex[:8]}",
        [topics.topic_name(LOAD, settings.topic_prefix)],
        LoadHandler(loads, clock.now, counted),
        watch=watch,
        name="load-report consumer",
        settings=dataclasses.replace(settings.consumer, auto_offset_reset="latest"),
    )


@contextlib.asynccontextmanager
async def autoscaling(
    serving: bootstrap.Serving, loads: LoadView, settings: ServingSettings, metrics: ServingMetrics
) -> AsyncIterator[AutoscalerController]:
    """Run the loop in the background until exit; the lease is released with its connection."""
    lease = AutoscalerLease(settings.pg_dsn, serving.store.schema, lease_s=settings.autoscaler_lease_s)
    controller = AutoscalerController(
        serving.service,
        MeteredServing(serving.uow.fenced(lease.check), metrics),
        serving.queries,
        loads,
        serving.clock.now,
        tick_s=settings.autoscaler_tick_s,
        keep=settings.autoscaler_decisions_kept,
    )
    task = asyncio.create_task(_loop(controller, lease, settings.autoscaler_tick_s), name="autoscaler")
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await lease.close()


async def _loop(controller: AutoscalerController, lease: AutoscalerLease, tick_s: float) -> None:
    acting: int | None = None
    while True:
        try:
            epoch = await lease.hold()
            if epoch is not None and epoch != acting:
                # Another holder may have scaled in between: the windows start afresh.
                controller.forget()
            acting = epoch
            if epoch is not None:
                await controller.tick()
        except LeaseLost as exc:
            log.warning("autoscaler: lease lost mid-tick, standing by: %s", exc)
            acting = None
        except Exception as exc:
            # The database or one service's decision failed: the next tick tries again from fresh reads.
            if is_transient(exc):
                log.warning("autoscaler: tick failed, retried in %.1fs: %r", tick_s, exc)
            else:
                log.exception("autoscaler: tick failed unexpectedly")
        await asyncio.sleep(tick_s)


@contextlib.asynccontextmanager
async def running_autoscaler(
    settings: ServingSettings, clock: Clock | None = None
) -> AsyncIterator[AutoscalerController]:
    """The autoscaler as its own process: store, load view, relay and the loop."""
    clock = clock or SystemClock()
    specs = [topics.spec(name) for name in (LOAD, "services.events", "jobs.commands")]
    watch = BrokerWatch(settings.kafka_bootstrap, specs, prefix=settings.topic_prefix)
    await watch.look()  # creates the topics, and is what the load consumer's keeper compares with
    async with contextlib.AsyncExitStack() as stack:
        serving = await stack.enter_async_context(bootstrap.bootstrap(settings, clock))
        publisher = await stack.enter_async_context(EventPublisher(settings.kafka_bootstrap))
        await stack.enter_async_context(serving.relay(publisher))
        loads, metrics = LoadView(), ServingMetrics()
        await stack.enter_async_context(load_consumer(settings, loads, clock, watch, metrics.load_reported))
        controller = await stack.enter_async_context(autoscaling(serving, loads, settings, metrics))
        log.info("serving autoscaler running, tick %.1fs", settings.autoscaler_tick_s)
        yield controller


async def serve_autoscaler(settings: ServingSettings, stop: asyncio.Event) -> None:
    async with running_autoscaler(settings):
        await stop.wait()


def main(settings: ServingSettings) -> None:
    """Foreground process: SIGTERM/SIGINT → graceful stop (the lease goes with its connection)."""
    from suanli.serving.entrypoints.foreground import run_foreground

    run_foreground("serving-autoscaler", settings.metrics_port, lambda stop: serve_autoscaler(settings, stop))
