"""Wiring of the billing service: the only place that picks adapters for its ports.

Production runs on PostgreSQL: the ledger's ports and the read side over the service's schema, next to
its event store, whose outbox the relay publishes. The in-memory adapters
(`suanli.billing.adapters.memory`) serve unit tests and the contract suites, never this wiring.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from suanli.billing.adapters.postgres import (
    PostgresBillingQueries,
    PostgresUnitOfWork,
    last_billed_period,
    migrate_billing,
)
from suanli.billing.domain.periods import Calendar
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.billing.service_layer.billing import BillingService
from suanli.bus import EventPublisher, topics
from suanli.clock import Clock
from suanli.eventstore import OutboxRelay, PostgresEventStore, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import KafkaOutboxSink
from suanli.resources.pricebook import PriceBook
from suanli.resources.pricebook_file import load_pricebook

RELAY_POLL_S = 0.5


class CalendarMismatch(Exception):
    """The schema's charges were billed in periods of another length than the configured one."""


@dataclass(frozen=True, slots=True)
class Billing:
    """The wired service: its use cases, their unit of work, the read side and the store below them."""

    settings: BillingSettings
    book: PriceBook
    calendar: Calendar
    service: BillingService
    store: PostgresEventStore
    uow: PostgresUnitOfWork
    queries: PostgresBillingQueries
    clock: Clock

    def relay(self, publisher: EventPublisher) -> OutboxRelay:
        """The relay publishing billing's outbox (ChargeRecorded, InvoiceIssued) through `publisher`."""
        feed = PostgresOutboxFeed(self.settings.pg_dsn, schema=self.settings.db_schema, clock=self.clock)
        return OutboxRelay(feed, KafkaOutboxSink(publisher), poll_interval=RELAY_POLL_S)


def price_book(settings: BillingSettings) -> PriceBook:
    """The price book of `settings`; `PriceBookError` names the file and the field when it is unusable."""
    return load_pricebook(settings.pricebook)


@asynccontextmanager
async def bootstrap(settings: BillingSettings, book: PriceBook, clock: Clock) -> AsyncIterator[Billing]:
    """Connect and migrate the store, wire the ports; the store closes on exit."""
    calendar = settings.calendar
    store = await PostgresEventStore.connect(settings.pg_dsn, schema=settings.db_schema, clock=clock)
    try:
        await migrate_billing(store)
        await _check_calendar(store, calendar, settings.period)
        billing_topic = topics.topic_name("billing.events", settings.topic_prefix)
        yield Billing(
            settings=settings,
            book=book,
            calendar=calendar,
            service=BillingService(book, calendar, settings.close_grace),
            store=store,
            uow=PostgresUnitOfWork(store, calendar, billing_topic, clock),
            queries=PostgresBillingQueries(store.pool, store.schema, calendar),
            clock=clock,
        )
    finally:
        await store.close()


async def _check_calendar(store: PostgresEventStore, calendar: Calendar, setting: str) -> None:
    # Stored charges and invoices keep only their periods' starts and are read back with the configured
    # calendar: another period length would relabel them and bill new usage into overlapping periods.
    stored = await last_billed_period(store)
    if stored is None:
        return
    start, end = stored
    period = calendar.period_of(start)
    if (period.start, period.end) != (start, end):
        raise CalendarMismatch(
            f"SUANLI_BILLING_PERIOD={setting} does not match schema {store.schema}: its latest charge is "
            f"billed in the period {start.isoformat()} .. {end.isoformat()}; keep the period length the "
            "schema was billed with, or use a new schema (SUANLI_BILLING_SCHEMA)"
        )
