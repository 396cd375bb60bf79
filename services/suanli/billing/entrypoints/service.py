"""The billing process: consumer, outbox relay, period closer and gRPC API around the wired service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from suanli.auth.server import server_auth
from suanli.billing import bootstrap
from suanli.billing.domain.invoices import ON_SCHEDULE
from suanli.billing.entrypoints.consumer import BillingHandler
from suanli.billing.entrypoints.grpc_api import BillingApi, start_server
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.billing.service_layer.billing import BillingService
from suanli.billing.service_layer.ports import BillingQueries, UnitOfWork
from suanli.bus import BrokerWatch, EventPublisher, KeptConsumer, RetryPolicy, topics
from suanli.clock import Clock, SystemClock
from suanli.eventstore import PostgresEventStore, ProcessedEventsPruner
from suanli.resources.pricebook_file import PriceBookError
from suanli.telemetry.grpc import with_tracing

log = logging.getLogger(__name__)

INPUTS = ("usage.metered", "jobs.events", "capacity.nodes")
# Database outages are retried in place for about a minute before the bus gives up on a record.
RETRY = RetryPolicy(max_attempts=10, initial_backoff_s=0.2, multiplier=2, max_backoff_s=10, ride_out_s=120)


@dataclass(slots=True)
class RunningBilling:
    """Handles tests and the CLI use: the bound gRPC port and the pieces to inspect."""

    grpc_port: int
    store: PostgresEventStore
    queries: BillingQueries
    service: BillingService
    uow: UnitOfWork
    consumer: KeptConsumer


@contextlib.asynccontextmanager
async def running(settings: BillingSettings, clock: Clock | None = None) -> AsyncIterator[RunningBilling]:
    """Start everything; on exit stop intake first, then the closer, the API and the relay."""
    clock = clock or SystemClock()
    book = bootstrap.price_book(settings)  # before any connection: a bad book stops start-up at once
    prefix = settings.topic_prefix
    specs = [topics.spec(name) for name in (*INPUTS, "billing.events")]
    # Its first look creates the topics; later ones tell the consumer's keeper that the broker started over.
    watch = BrokerWatch(settings.kafka_bootstrap, specs, prefix=prefix)
    await watch.look()
    async with contextlib.AsyncExitStack() as stack:
        billing = await stack.enter_async_context(bootstrap.bootstrap(settings, book, clock))
        publisher = await stack.enter_async_context(EventPublisher(settings.kafka_bootstrap))
        await stack.enter_async_context(billing.relay(publisher))
        # Billing owns its processed_events (the consumer's de-duplication records): it prunes them.
        await stack.enter_async_context(ProcessedEventsPruner(billing.store, schema=billing.store.schema))

        api = BillingApi(
            billing.queries, billing.uow, billing.service, billing.calendar, book.currency, clock.now
        )
        auth = await stack.enter_async_context(server_auth(settings))
        server, port = await start_server(
            api, settings.listen, with_tracing(() if auth is None else (auth.interceptor,)), settings
        )
        stack.push_async_callback(server.stop, 5.0)

        closer = asyncio.create_task(
            _close_periods(billing.uow, billing.service, clock, settings.close_check_s)
        )
        stack.push_async_callback(_cancel, closer)

        names = {name: topics.topic_name(name, prefix) for name in INPUTS}
        handler = BillingHandler(billing.service, billing.uow, settings.group, names)

        consumer = await stack.enter_async_context(
            KeptConsumer.of(
                settings.kafka_bootstrap,
                settings.group,
                names.values(),
                handler,
                watch=watch,
                name="billing consumer",
                retry=RETRY,
                settings=settings.consumer,
            )
        )
        log.info("billing serving gRPC on port %d, consuming %s", port, ", ".join(names.values()))
        yield RunningBilling(port, billing.store, billing.queries, billing.service, billing.uow, consumer)


async def close_due_periods(uow: UnitOfWork, service: BillingService, clock: Clock) -> int:
    """Issue every invoice that is due now; one transaction per invoice. Returns how many were issued."""
    now = clock.now()
    async with uow.begin() as unit:
        due = await service.periods_due(unit, now)
    for tenant, period in due:
        async with uow.begin() as unit:
            await service.close_period(unit, tenant, period, now, ON_SCHEDULE)
    return len(due)


async def _close_periods(uow: UnitOfWork, service: BillingService, clock: Clock, every_s: float) -> None:
    while True:
        try:
            issued = await close_due_periods(uow, service, clock)
            if issued:
                log.info("issued %d invoice(s)", issued)
        except Exception:  # the next tick retries; one bad tick must not end the closer
            log.exception("closing due periods failed")
        await asyncio.sleep(every_s)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def serve(settings: BillingSettings, stop: asyncio.Event) -> None:
    """Run until `stop` is set (SIGTERM/SIGINT in `suanli serve billing`)."""
    async with running(settings):
        await stop.wait()


def main(settings: BillingSettings) -> None:
    """Foreground process: telemetry, SIGTERM/SIGINT → graceful stop."""
    import signal

    from suanli import telemetry

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handle = telemetry.setup("billing", metrics_port=settings.metrics_port)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    try:
        asyncio.run(_main())
    except (PriceBookError, bootstrap.CalendarMismatch) as exc:
        raise SystemExit(f"billing: {exc}") from None
    finally:
        handle.shutdown()
