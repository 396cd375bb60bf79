"""The agent on the event bus: contract events out through `EventPublisher`, a consumer of ``placements``."""

from __future__ import annotations

from typing import Any

from suanli import contracts
from suanli.bus import (
    BrokerWatch,
    ConsumerSettings,
    EventConsumer,
    EventPublisher,
    Handler,
    topic_name,
    topics,
)

# services.load: the load reports of the replicas the agent hosts, simulated (adapters.replicas) or real
# (adapters.replica_scrape).
PRODUCED_TOPICS = (
    topics.NODE_SNAPSHOTS,
    topics.LINKS_MEASURED,
    topics.TASKS_LIFECYCLE,
    topics.USAGE_SAMPLES,
    topics.SERVICES_LOAD,
)
CONSUMED_TOPICS = (topics.PLACEMENTS,)


class BusSink:
    """`EventSink` over an `EventPublisher`: topic and key come from the contracts catalogue."""

    def __init__(self, publisher: EventPublisher, *, prefix: str | None = None) -> None:
        self._publisher = publisher
        self._prefix = prefix

    async def publish(self, event_name: str, record: dict[str, Any]) -> None:
        spec = contracts.EVENTS[event_name]
        await self._publisher.publish(
            topic_name(spec.topic, self._prefix), str(record[spec.key]), event_name, record
        )


def agent_broker_watch(bootstrap: str, prefix: str | None = None) -> BrokerWatch:
    """A watch over the agent's topics: each look creates the missing ones."""
    return BrokerWatch(bootstrap, (*PRODUCED_TOPICS, *CONSUMED_TOPICS), prefix=prefix)


async def ensure_agent_topics(bootstrap: str, prefix: str | None = None) -> None:
    await agent_broker_watch(bootstrap, prefix).look()


def order_consumer(
    bootstrap: str,
    group_id: str,
    handler: Handler,
    *,
    prefix: str | None = None,
    settings: ConsumerSettings | None = None,
    from_start: bool = False,
) -> EventConsumer:
    return EventConsumer(
        bootstrap,
        group_id,
        [topic_name(topics.PLACEMENTS.name, prefix)],
        handler,
        settings=settings,
        from_start=from_start,
    )
