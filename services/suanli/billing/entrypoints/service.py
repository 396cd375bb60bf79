"""The billing process: consumer, outbox relay, period closer and gRPC API, wired in one place."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from suanli.billing.adapters.postgres import BillingQueries, BillingUnitOfWork, migrate_billing
from suanli.billing.adapters.pricebook_file import PriceBookError, load_pricebook
from suanli.billing.domain.periods import Calendar, PeriodKind
from suanli.billing.entrypoints.consumer import BillingHandler
from suanli.billing.entrypoints.grpc_api import BillingApi, start_server
from suanli.billing.service_layer.billing import BillingService
from suanli.bus import ConsumerSettings, EventConsumer, EventPublisher, RetryPolicy, ensure_topics, topics
from suanli.clock import Clock, SystemClock
from suanli.data import data_path
from suanli.eventstore import OutboxRelay, PostgresEventStore, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import KafkaOutboxSink

log = logging.getLogger(__name__)

DEFAULT_PRICEBOOK = data_path("deploy/billing/pricebook.yaml")
DEFAULT_GRPC_ADDR = "0.0.0.0:50055"
INPUTS = ("usage.metered", "jobs.events", "capacity.nodes")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class BillingConfig:
    bootstrap: str
    dsn: str
    pricebook: Path = DEFAULT_PRICEBOOK
    schema: str = "billing"
    topic_prefix: str = ""
    group_id: str = "billing"
    period: PeriodKind = PeriodKind.MONTHLY
    close_grace: timedelta = timedelta(minutes=15)
    close_check_s: float = 60.0
    grpc_addr: str = DEFAULT_GRPC_ADDR
    metrics_port: int | None = None
    consumer: ConsumerSettings = field(default_factory=ConsumerSettings)

    @classmethod
    def from_env(cls, **overrides: object) -> BillingConfig:
        """SUANLI_* variables, with explicit (non-None) overrides winning; ConfigError names the variable."""
        env = os.environ
        values: dict[str, object] = {}
        for key, var in (("bootstrap", "SUANLI_KAFKA_BOOTSTRAP"), ("dsn", "SUANLI_PG_DSN")):
            if not env.get(var) and overrides.get(key) is None:
                raise ConfigError(f"{var} is required")
            values[key] = env.get(var)
        text = {
            "pricebook": "SUANLI_BILLING_PRICEBOOK",
            "schema": "SUANLI_BILLING_SCHEMA",
            "topic_prefix": "SUANLI_TOPIC_PREFIX",
            "group_id": "SUANLI_BILLING_GROUP",
            "grpc_addr": "SUANLI_BILLING_LISTEN",
        }
        for key, var in text.items():
            if env.get(var):
                values[key] = Path(env[var]) if key == "pricebook" else env[var]
        try:
            if env.get("SUANLI_BILLING_PERIOD"):
                values["period"] = PeriodKind(env["SUANLI_BILLING_PERIOD"])
            if env.get("SUANLI_BILLING_CLOSE_GRACE_S"):
                values["close_grace"] = timedelta(seconds=float(env["SUANLI_BILLING_CLOSE_GRACE_S"]))
            if env.get("SUANLI_BILLING_CLOSE_CHECK_S"):
                values["close_check_s"] = float(env["SUANLI_BILLING_CLOSE_CHECK_S"])
            if env.get("SUANLI_BILLING_SESSION_TIMEOUT_MS"):
                # How soon a crashed instance's partitions move to the others.
                timeout = int(env["SUANLI_BILLING_SESSION_TIMEOUT_MS"])
                values["consumer"] = ConsumerSettings(
                    session_timeout_ms=timeout, heartbeat_interval_ms=max(100, timeout // 10)
                )
            if env.get("SUANLI_METRICS_PORT"):
                values["metrics_port"] = int(env["SUANLI_METRICS_PORT"])
        except ValueError as exc:
            raise ConfigError(f"bad billing setting: {exc}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


@dataclass(slots=True)
class RunningBilling:
    """Handles tests and the CLI use: the bound gRPC port and the pieces to inspect."""

    grpc_port: int
    store: PostgresEventStore
    queries: BillingQueries
    service: BillingService
    uow: BillingUnitOfWork
    consumer: EventConsumer


@contextlib.asynccontextmanager
async def running(config: BillingConfig, clock: Clock | None = None) -> AsyncIterator[RunningBilling]:
    """Start everything; on exit stop intake first, then the closer, the API and the relay."""
    clock = clock or SystemClock()
    book = load_pricebook(config.pricebook)  # before any connection: a bad book stops start-up at once
    calendar = Calendar(config.period)
    prefix = config.topic_prefix
    specs = [topics.spec(name) for name in (*INPUTS, "billing.events")]
    await ensure_topics(config.bootstrap, specs, prefix=prefix)
    store = await PostgresEventStore.connect(config.dsn, schema=config.schema, clock=clock)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(store.close)
        await migrate_billing(store)
        uow = BillingUnitOfWork(store, calendar, topics.topic_name("billing.events", prefix), clock)
        service = BillingService(book, calendar, config.close_grace)
        queries = BillingQueries(store.pool, store.schema, calendar)

        publisher = await stack.enter_async_context(EventPublisher(config.bootstrap))
        relay = OutboxRelay(
            PostgresOutboxFeed(config.dsn, schema=config.schema, clock=clock),
            KafkaOutboxSink(publisher),
            poll_interval=0.5,
        )
        await stack.enter_async_context(relay)

        api = BillingApi(queries, uow, service, calendar, book.currency, clock.now)
        server, port = await start_server(api, config.grpc_addr)
        stack.push_async_callback(server.stop, 5.0)

        closer = asyncio.create_task(_close_periods(uow, service, clock, config.close_check_s))
        stack.push_async_callback(_cancel, closer)

        names = {name: topics.topic_name(name, prefix) for name in INPUTS}
        handler = BillingHandler(service, uow, config.group_id, names)
        # Database outages are retried in place for about a minute before the bus gives up on a record.
        retry = RetryPolicy(max_attempts=10, initial_backoff_s=0.2, multiplier=2, max_backoff_s=10)
        consumer = EventConsumer(
            config.bootstrap, config.group_id, names.values(), handler, retry=retry, settings=config.consumer
        )
        await stack.enter_async_context(consumer)
        log.info("billing serving gRPC on port %d, consuming %s", port, ", ".join(names.values()))
        yield RunningBilling(port, store, queries, service, uow, consumer)


async def close_due_periods(uow: BillingUnitOfWork, service: BillingService, clock: Clock) -> int:
    """Issue every invoice that is due now; one transaction per invoice. Returns how many were issued."""
    now = clock.now()
    async with uow.begin() as unit:
        due = await service.periods_due(unit, now)
    for tenant, period in due:
        async with uow.begin() as unit:
            await service.close_period(unit, tenant, period, now)
    return len(due)


async def _close_periods(
    uow: BillingUnitOfWork, service: BillingService, clock: Clock, every_s: float
) -> None:
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


async def serve(config: BillingConfig, stop: asyncio.Event) -> None:
    """Run until `stop` is set (SIGTERM/SIGINT in `suanli serve billing`)."""
    async with running(config):
        await stop.wait()


def main(config: BillingConfig) -> None:
    """Foreground process: telemetry, SIGTERM/SIGINT → graceful stop."""
    import signal

    from suanli import telemetry

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handle = telemetry.setup("billing", metrics_port=config.metrics_port)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop)

    try:
        asyncio.run(_main())
    except PriceBookError as exc:
        raise SystemExit(f"billing: {exc}") from None
    finally:
        handle.shutdown()
