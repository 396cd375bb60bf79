"""The adapter bundle the contract fixtures yield (a module of its own: test modules import it by name)."""

from __future__ import annotations

from dataclasses import dataclass

from suanli.eventstore import InMemoryEventStore, OutboxFeed, PostgresEventStore


@dataclass
class Adapter:
    """A store under test plus the relay feed over the same outbox."""

    name: str
    store: InMemoryEventStore | PostgresEventStore
    feed: OutboxFeed
