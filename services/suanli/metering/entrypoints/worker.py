"""Run the metering worker in this process: create its topics, wire telemetry, hand over to faust."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer

from suanli.bus.faust import run_worker
from suanli.bus.security import client_options
from suanli.metering.bootstrap import metering_app
from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.metering.entrypoints.topics import MeteringTopics
from suanli.telemetry import setup

log = logging.getLogger(__name__)


class TopicLayoutError(RuntimeError):
    """Input topics exist with partition counts the tables cannot be co-partitioned with."""


async def check_copartitioned(bootstrap: str, names: MeteringTopics) -> None:
    """Refuse to start when snapshots and placements would not land on the node table's partitions, or
    usage samples on the task table's.

    A topic created earlier by auto-creation (a producer that started first) keeps the broker's default
    count; each node's state would then be split across workers.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **client_options())
    await consumer.start()
    try:
        await consumer.topics()
        # Samples are applied to the task table's partition of the same number (entrypoints.app).
        inputs = (names.snapshots, names.placements, names.samples)
        counts = {t: len(consumer.partitions_for_topic(t) or ()) for t in inputs}
    finally:
        await consumer.stop()
    wrong = {t: n for t, n in counts.items() if n != names.partitions}
    if wrong:
        raise TopicLayoutError(
            f"metering needs {names.partitions} partitions on {sorted(counts)}, found {wrong}; "
            "recreate those topics with the catalogue's partition counts (suanli.bus.ensure_topics)"
        )


def run(settings: MeteringSettings, *, loglevel: str = "info") -> None:
    """Blocks until the worker is stopped (SIGINT/SIGTERM)."""
    # faust runs on the loop current when the worker is built; topics must exist (with their partition
    # counts and compaction, which only creation can set on Tansu) before any agent subscribes.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    telemetry = setup("metering", metrics_port=settings.metrics_port)
    try:
        service = metering_app(settings)
        # Creates the topics (the broker watch's first look: a later one tells a broker that started over).
        loop.run_until_complete(service.keeper.first_look())
        loop.run_until_complete(
            check_copartitioned(settings.bootstrap, MeteringTopics(settings.topic_prefix))
        )
        log.info("metering %s on %s, prefix %r", settings.group_id, settings.bootstrap, settings.topic_prefix)
        run_worker(service.app, loop, loglevel=loglevel)
    finally:
        telemetry.shutdown()
