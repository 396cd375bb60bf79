"""The agent's order intake against a broker that restarts empty (its own broker: the session's is
shared) while the agent is acting on an order. Someone else recreates the topics first, as the
scheduler's watchdog would; the order in hand is then done and its offset, a position in the old log,
is committed into the new broker, which accepts it from a member it never knew. The intake must still
see that the broker started over (its new cluster id), replace its consumer by one that reads from the
beginning, and act on the placements written after the restart: fewer than before, so a consumer that
starts from the committed position skips every one of them (as the agents did before the watch).
"""

from __future__ import annotations

import asyncio

import pytest
from brokerkit import publish_samples

from suanli.bus import ConsumedEvent, ConsumerSettings, KeptConsumer, ensure_topics, topic_name, topics
from suanli.infra.broker import BrokerProcess
from suanli.infra.polling import until
from suanli.sensing.adapters.bus import CONSUMED_TOPICS
from suanli.sensing.bootstrap import AgentBus

PREFIX = "restart"
GROUP = "sensing-agent-it"
BEFORE = 20
FAST = ConsumerSettings(
    fetch_max_wait_ms=100, poll_timeout_ms=100, session_timeout_ms=6_000, heartbeat_interval_ms=300
)

pytestmark = pytest.mark.timeout(120)


async def place(bootstrap: str, count: int, tag: str) -> list[str]:
    return await publish_samples(
        bootstrap, topic_name(topics.PLACEMENTS.name, PREFIX), "TaskPlaced", count, tag
    )


async def test_the_order_intake_reads_the_new_broker_after_it_restarts_empty(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    seen: list[str] = []
    in_hand = asyncio.Event()  # set: the last order placed before the restart is done with

    async def handle(event: ConsumedEvent) -> None:
        seen.append(str(event.record["event_id"]))
        if event.record["task_id"] == f"before-{BEFORE - 1}":
            await in_hand.wait()

    async def read(wanted: list[str]) -> bool:
        return set(wanted) <= set(seen)

    bus = AgentBus(bootstrap, PREFIX, client_id="it-agent", consumer=FAST)
    await bus.start()
    intake = KeptConsumer(
        lambda from_start: bus.order_consumer(GROUP, handle, from_start=from_start),
        pause_s=0.1,
        watch=bus.watch,
        check_s=0.2,
    )
    stop = asyncio.Event()
    running = asyncio.create_task(intake.run(stop))
    try:
        before = await place(bootstrap, BEFORE, "before")
        await until(lambda: read(before), 30, "the orders placed before the restart")
        assert intake.rebuilds == 0

        first_cluster = broker.cluster_id
        broker.stop()
        broker.start()  # the same port, nothing kept
        assert broker.cluster_id != first_cluster
        # The scheduler's watchdog recreates the topics first: the intake finds none missing.
        await ensure_topics(bootstrap, CONSUMED_TOPICS, prefix=PREFIX)
        in_hand.set()
        after = await place(bootstrap, 5, "after")
        await until(lambda: read(after), 60, "the orders placed after the restart")
        assert intake.rebuilds == 1
    finally:
        stop.set()
        await intake.stop(running)
        await bus.stop()
