"""Tables' changelog topics declared again when the broker no longer knows them.

Tansu keeps nothing across a restart (ARCHITECTURE.md §3). Faust declares each table's changelog topic once,
at start-up; after the broker comes back empty its producer has no partitions for that topic, and the next
table write fails inside faust (aiokafka's partitioner iterates the topic's partitions, None) and stops the
worker. So before a batch writes its tables, each changelog topic the producer knows no partitions of is
declared again and its metadata awaited: the write then lands, as on a first start.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


class ChangelogTopics:
    """`Effects`' prepare hook for faust tables (anything with a `changelog_topic`)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, tables: list[Any]) -> None:
        # faust's aiokafka driver: the AIOKafkaProducer behind the app's producer, whose partitioner the
        # table writes use (`Producer.key_partition`).
        client = self._app.producer._ensure_producer().client
        for table in tables:
            topic = table.changelog_topic
            name = topic.get_topic_name()
            if client.cluster.partitions_for_topic(name) is not None:
                continue
            log.warning("changelog %s unknown to the broker (restarted empty?): declared again", name)
            await topic.declare()
            await client._wait_on_metadata(name)
