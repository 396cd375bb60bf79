"""Physical names of the topics metering reads and writes, under the deployment's prefix."""

from __future__ import annotations

from dataclasses import dataclass

from suanli.bus import topics
from suanli.bus.topics import TopicSpec, topic_name

# Internal: every fact about a task, keyed by task id (see app.py). As many partitions as the task
# topics, so a task's facts and its lifecycle events land on the same partition number.
FACTS = TopicSpec(
    "metering.task-facts",
    topics.TASKS_LIFECYCLE.partitions,
    "task id",
    doc="Metering-internal: task facts from every input topic, re-keyed by task id.",
)


@dataclass(frozen=True, slots=True)
class MeteringTopics:
    prefix: str = ""

    def _name(self, spec: TopicSpec) -> str:
        return topic_name(spec.name, self.prefix)

    @property
    def partitions(self) -> int:
        # Tables are co-partitioned with the topics that write them; those all share this count.
        assert (
            topics.NODE_SNAPSHOTS.partitions
            == topics.PLACEMENTS.partitions
            == topics.USAGE_SAMPLES.partitions
            == FACTS.partitions
        )
        return FACTS.partitions

    @property
    def snapshots(self) -> str:
        return self._name(topics.NODE_SNAPSHOTS)

    @property
    def placements(self) -> str:
        return self._name(topics.PLACEMENTS)

    @property
    def lifecycle(self) -> str:
        return self._name(topics.TASKS_LIFECYCLE)

    @property
    def samples(self) -> str:
        return self._name(topics.USAGE_SAMPLES)

    @property
    def jobs(self) -> str:
        return self._name(topics.JOBS_EVENTS)

    @property
    def facts(self) -> str:
        return self._name(FACTS)

    @property
    def capacity(self) -> str:
        return self._name(topics.CAPACITY_NODES)

    @property
    def status(self) -> str:
        return self._name(topics.NODES_STATUS)

    @property
    def usage(self) -> str:
        return self._name(topics.USAGE_METERED)

    @staticmethod
    def specs() -> tuple[TopicSpec, ...]:
        """Everything metering touches, for ``ensure_topics`` (which adds the dead-letter topics)."""
        return (
            topics.NODE_SNAPSHOTS,
            topics.PLACEMENTS,
            topics.TASKS_LIFECYCLE,
            topics.USAGE_SAMPLES,
            topics.JOBS_EVENTS,
            FACTS,
            topics.CAPACITY_NODES,
            topics.NODES_STATUS,
            topics.USAGE_METERED,
        )
