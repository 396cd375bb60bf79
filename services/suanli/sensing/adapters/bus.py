"""The agent on the event bus: contract events out through `EventPublisher`, orders in from ``placements``."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from suanli import contracts
from suanli.bus import ConsumedEvent, ConsumerSettings, EventConsumer, EventPublisher, topic_name, topics
from suanli.bus.admin import ensure_topics
from suanli.clock import Clock
from suanli.sensing.service_layer.host import AgentHost

log = logging.getLogger(__name__)

PRODUCED_TOPICS = (topics.NODE_SNAPSHOTS, topics.LINKS_MEASURED, topics.TASKS_LIFECYCLE, topics.USAGE_SAMPLES)
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


async def ensure_agent_topics(bootstrap: str, prefix: str | None = None) -> None:
    await ensure_topics(bootstrap, (*PRODUCED_TOPICS, *CONSUMED_TOPICS), prefix=prefix)


class OrderHandler:
    """Consumer handler for ``placements``: stale orders are skipped, invalid ones raise (dead-letter)."""

    def __init__(self, host: AgentHost, *, clock: Clock, max_age_s: float | None = None) -> None:
        self._host = host
        self._clock = clock
        self._max_age_s = max_age_s

    async def __call__(self, event: ConsumedEvent) -> None:
        if event.tombstone:
            return
        if self._stale(event.record.get("occurred_at")):
            # The scheduler reconciles against our snapshots, so an order it gave up on is safe to skip.
            log.info("skipping stale %s for %s", event.event_name, event.record.get("task_id"))
            return
        await self._host.handle_order(event.event_name, event.record)

    def _stale(self, occurred_at: Any) -> bool:
        if self._max_age_s is None or not isinstance(occurred_at, dt.datetime):
            return False
        return (self._clock.now() - occurred_at).total_seconds() > self._max_age_s


def order_consumer(
    bootstrap: str,
    group_id: str,
    handler: OrderHandler,
    *,
    prefix: str | None = None,
    settings: ConsumerSettings | None = None,
) -> EventConsumer:
    return EventConsumer(
        bootstrap, group_id, [topic_name(topics.PLACEMENTS.name, prefix)], handler, settings=settings
    )
