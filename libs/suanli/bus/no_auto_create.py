"""No Kafka client of the platform makes the broker create a topic by asking for its metadata.

aiokafka asks for a topic's metadata with ``allow_auto_topic_creation`` set, and a broker that allows it
(Tansu always does; Apache Kafka unless ``auto.create.topics.enable=false``) creates a missing topic with
its own default partition count: 4 on Tansu, where the catalogue has 8 for the keyed streams. After the
development broker restarted empty, the first client to touch a topic (an agent sending a snapshot, the
relay a placement) recreated it that way before any `BrokerWatch` could create it as catalogued, and
metering then refused to start on the wrong layout (`check_copartitioned`) or producers kept sending to
partitions that no longer existed. Topics are created only by `suanli.bus.ensure_topics` (and faust's
own admin requests for its internal topics); a client that finds one missing waits and retries until a
watch has created it.

Installed by every service and agent process as it starts (`suanli serve ...`, `suanli agent`): it
replaces the request class aiokafka's client builds metadata requests from, for the whole process. Tools
and tests that make their topics by producing to them (prefixed test topics) do not install it.
"""

from __future__ import annotations

import aiokafka.client
from aiokafka.protocol.metadata import MetadataRequest


class MetadataRequestWithoutCreation(MetadataRequest):
    """A metadata request that never asks the broker to create the topics it names."""

    def __init__(
        self, topics: list[str] | None = None, allow_auto_topic_creation: bool | None = None
    ) -> None:
        super().__init__(topics, allow_auto_topic_creation=bool(allow_auto_topic_creation))


def install() -> None:
    """Make every aiokafka client in this process (the bus's, faust's) ask without creation."""
    aiokafka.client.MetadataRequest = MetadataRequestWithoutCreation
