"""The routing API across a broker that restarts empty (its own broker: the session's is shared). Its view
readers hold positions in the old logs and its load consumer a position the new broker may never reach;
once its watches see the new cluster, it reads the recreated topics from the beginning: a link state and
a load report written after the restart (fewer records than before) are in its views.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

import pytest

from suanli.bus import EventPublisher, topic_name
from suanli.infra.broker import BrokerProcess
from suanli.infra.polling import until
from suanli.routing.bootstrap import routing_api
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.service_layer.records import link_record
from suanli.routing.testing import region_link, replica_load

PREFIX = "restart"
EAST, WEST = "cn-east", "cn-west"

pytestmark = pytest.mark.timeout(120)


async def publish_links(bootstrap: str, rtts: list[float]) -> None:
    async with EventPublisher(bootstrap) as publisher:
        for rtt in rtts:
            state = link_record(
                region_link(EAST, WEST, rtt),
                producer="test",
                event_id=str(uuid.uuid4()),
                at=datetime.now(UTC),
            )
            await publisher.publish(
                topic_name("network.links", PREFIX), state["link_id"], "NetworkLinkChanged", state
            )


async def publish_load(bootstrap: str, replica: str) -> None:
    record = replica_load("svc", replica, EAST, time.time_ns() // 1_000_000)
    async with EventPublisher(bootstrap) as publisher:
        await publisher.publish(topic_name("services.load", PREFIX), "svc", "ReplicaLoadReported", record)


async def test_views_and_load_reports_are_read_again_after_the_broker_restarts_empty(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    api = routing_api(
        RoutingSettings.load({}, bootstrap=bootstrap, topic_prefix=PREFIX, listen="127.0.0.1:0")
    )
    await api.start()
    try:
        await publish_links(bootstrap, [40.0, 41.0, 42.0, 43.0])

        async def rtt(wanted: float) -> bool:
            return [link.rtt_ms for link in api.network.region_links()] == [wanted]

        await until(lambda: rtt(43.0), 30, "the link state written before the restart")
        await asyncio.wait_for(api.ready(), 30)
        await publish_load(bootstrap, "r-before")

        async def loads(replica: str) -> bool:
            return replica in api.loads.of("svc", datetime.now(UTC))

        await until(lambda: loads("r-before"), 30, "the load report written before the restart")

        broker.stop()
        broker.start()  # the same port, nothing kept

        async def looked() -> bool:  # the topics are back once a watch has looked
            return api.load_consumer.rebuilds == api.rewinds == 1

        await until(looked, 30, "both watches seeing the new cluster")
        await api.load_consumer.wait_assigned()
        await publish_links(bootstrap, [90.0])
        await publish_load(bootstrap, "r-after")
        await until(lambda: rtt(90.0), 30, "the link state written after the restart")
        await until(lambda: loads("r-after"), 30, "the load report written after the restart")
    finally:
        await api.stop()
