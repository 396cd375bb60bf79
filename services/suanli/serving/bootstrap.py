"""Wiring of the serving service: the only place that picks adapters for its ports.

Production runs on PostgreSQL: the service states and the read side over the service's schema, next to
its event store, whose outbox the relay publishes (to services.events, and the replicas' commands to
jobs.commands). The in-memory adapters (`suanli.serving.adapters.memory`) serve unit tests only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from suanli.bus import EventPublisher, topics
from suanli.clock import Clock, uuid4_factory
from suanli.eventstore import OutboxRelay, PostgresEventStore, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import KafkaOutboxSink
from suanli.resources.catalogue import default_catalogue
from suanli.serving.adapters.postgres import PostgresServing, PostgresServingQueries, migrate_serving
from suanli.serving.entrypoints.settings import ServingSettings
from suanli.serving.service_layer.serving import ServingService

RELAY_POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class Serving:
    """The wired service: its use cases, their unit of work, the read side and the store below them."""

    settings: ServingSettings
    service: ServingService
    store: PostgresEventStore
    uow: PostgresServing
    queries: PostgresServingQueries
    clock: Clock

    def relay(self, publisher: EventPublisher) -> OutboxRelay:
        """The relay publishing serving's outbox (events, scheduler commands) through `publisher`."""
        feed = PostgresOutboxFeed(self.settings.pg_dsn, schema=self.settings.db_schema, clock=self.clock)
        return OutboxRelay(feed, KafkaOutboxSink(publisher), poll_interval=RELAY_POLL_S)


def _service_id() -> str:
    return f"svc-{uuid4_factory().hex[:12]}"


@asynccontextmanager
async def bootstrap(settings: ServingSettings, clock: Clock) -> AsyncIterator[Serving]:
    """Connect and migrate the store, wire the ports; the store closes on exit."""
    store = await PostgresEventStore.connect(settings.pg_dsn, schema=settings.db_schema, clock=clock)
    try:
        await migrate_serving(store)
        prefix = settings.topic_prefix
        names = (topics.topic_name("services.events", prefix), topics.topic_name("jobs.commands", prefix))
        yield Serving(
            settings=settings,
            service=ServingService(default_catalogue(), settings.policy, _service_id),
            store=store,
            uow=PostgresServing(store, names, uuid4_factory, clock),
            queries=PostgresServingQueries(store.pool, store.schema),
            clock=clock,
        )
    finally:
        await store.close()
