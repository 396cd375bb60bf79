"""Physical names of the topics routing reads and writes, under the deployment's prefix."""

from __future__ import annotations

from dataclasses import dataclass

from suanli.bus import topics
from suanli.bus.topics import TopicSpec, topic_name

# Internal: probe rounds re-keyed by region pair, so one worker owns every site path of a region pair
# and can summarise it (links.measured is keyed by source site).
PROBES = TopicSpec(
    "routing.probes",
    topics.LINKS_MEASURED.partitions,
    "region pair (source region -> destination region)",
    doc="Routing-internal: valid LinkMeasured records re-keyed by region pair.",
)


@dataclass(frozen=True, slots=True)
class RoutingTopics:
    prefix: str = ""

    @property
    def measured(self) -> str:
        return topic_name(topics.LINKS_MEASURED.name, self.prefix)

    @property
    def probes(self) -> str:
        return topic_name(PROBES.name, self.prefix)

    @property
    def links(self) -> str:
        return topic_name(topics.NETWORK_LINKS.name, self.prefix)

    @property
    def capacity(self) -> str:
        return topic_name(topics.CAPACITY_NODES.name, self.prefix)

    @property
    def load(self) -> str:
        return topic_name(topics.SERVICES_LOAD.name, self.prefix)

    @staticmethod
    def specs() -> tuple[TopicSpec, ...]:
        """Everything routing touches, for ``ensure_topics`` (which adds the dead-letter topics)."""
        return (
            topics.LINKS_MEASURED,
            PROBES,
            topics.NETWORK_LINKS,
            topics.CAPACITY_NODES,
            topics.SERVICES_LOAD,
        )
