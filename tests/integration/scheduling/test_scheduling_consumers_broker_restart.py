"""The scheduler's consumer watchdog against a broker that restarts empty (its own broker: the session's
is shared). Two watchdogs run, as a leader's and its standby's do, and someone else recreates the
topics before either looks: each must still see that the broker started over (its new cluster id),
rebuild its consumers, and hand its handler what is written after the restart.

Without the cluster id only the first to find a topic missing rebuilt (rebuilds [1, 0]); the other's
consumers read on only because Tansu, having forgotten their group, made them rejoin, which a broker
need not do.
"""

from __future__ import annotations

import asyncio

from brokerkit import publish_samples

from suanli.bus import ConsumedEvent, ConsumerSettings, ensure_topics, topic_name, topics
from suanli.infra.broker import BrokerProcess
from suanli.infra.polling import until
from suanli.scheduling.adapters.bus import ConsumerSpec, SupervisedConsumers

PREFIX = "restart"
TOPICS = (topics.TASKS_LIFECYCLE,)
FAST = ConsumerSettings(
    fetch_max_wait_ms=100, poll_timeout_ms=100, session_timeout_ms=6_000, heartbeat_interval_ms=300
)


def watchdog(bootstrap: str, name: str, seen: list[str]) -> SupervisedConsumers:
    async def handle(event: ConsumedEvent) -> None:
        seen.append(str(event.record["event_id"]))

    spec = ConsumerSpec(f"scheduling-view-{name}", (topics.TASKS_LIFECYCLE.name,), handle)
    return SupervisedConsumers(bootstrap, PREFIX, [spec], TOPICS, check_s=0.2, backoff_s=0.1, settings=FAST)


async def publish(bootstrap: str, count: int, tag: str) -> list[str]:
    return await publish_samples(
        bootstrap, topic_name(topics.TASKS_LIFECYCLE.name, PREFIX), "TaskStarted", count, tag
    )


async def read_all(got: list[str], wanted: list[str]) -> bool:
    return set(wanted) <= set(got)


async def test_every_watchdog_rebuilds_after_the_broker_restarts_empty(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    seen: dict[str, list[str]] = {"leader": [], "standby": []}
    dogs = {name: watchdog(bootstrap, name, got) for name, got in seen.items()}
    runs = [asyncio.create_task(dog.run()) for dog in dogs.values()]
    try:
        before = await publish(bootstrap, 20, "before")
        for name, got in seen.items():
            await until(lambda got=got: read_all(got, before), 30, f"{name} reading the first records")
        assert [dog.rebuilds for dog in dogs.values()] == [0, 0]

        first_cluster = broker.cluster_id
        broker.stop()
        broker.start()  # the same port, nothing kept
        assert broker.cluster_id != first_cluster
        # Another service recreates the topics first: neither watchdog finds one missing.
        await ensure_topics(bootstrap, TOPICS, prefix=PREFIX)
        # Fewer records than before: a consumer left at its old positions would skip every one.
        after = await publish(bootstrap, 5, "after")
        for name, got in seen.items():
            await until(lambda got=got: read_all(got, after), 60, f"{name} reading what came next")
        assert [dog.rebuilds for dog in dogs.values()] == [1, 1]
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
