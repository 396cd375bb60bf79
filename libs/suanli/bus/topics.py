"""The catalogue of Kafka topics: one `TopicSpec` per topic, and the naming rules for prefixes and DLQs.

Every service names topics through this module, so a namespace prefix (tests, several deployments on one
cluster) and the dead-letter convention are applied in exactly one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import StrEnum

TOPIC_PREFIX_ENV = "SUANLI_TOPIC_PREFIX"
DLQ_SUFFIX = ".dlq"

DAY_MS = 24 * 60 * 60 * 1000
# Compacted views keep the latest value per key forever; Kafka spells "no time limit" as -1.
FOREVER_MS = -1
# Dead letters wait for a human: keep them longer than any source topic.
DLQ_RETENTION_MS = 30 * DAY_MS


class CleanupPolicy(StrEnum):
    DELETE = "delete"
    COMPACT = "compact"


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    key: str
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    retention_ms: int = 7 * DAY_MS
    doc: str = ""

    @property
    def dlq(self) -> str:
        return dlq_topic(self.name)

    @property
    def configs(self) -> dict[str, str]:
        """Topic configs passed at creation (the only time Tansu accepts them: no AlterConfigs)."""
        return {"cleanup.policy": self.cleanup_policy.value, "retention.ms": str(self.retention_ms)}

    def dlq_spec(self) -> TopicSpec:
        # One partition: dead letters are rare and read by people, in the order they failed.
        return TopicSpec(
            name=self.dlq,
            partitions=1,
            key=f"original key ({self.key})",
            cleanup_policy=CleanupPolicy.DELETE,
            retention_ms=DLQ_RETENTION_MS,
            doc=f"Dead letters of {self.name}: records that failed to decode or to be handled.",
        )

    def prefixed(self, prefix: str) -> TopicSpec:
        return replace(self, name=topic_name(self.name, prefix))


def dlq_topic(topic: str) -> str:
    """Dead-letter topic of ``topic`` (already prefixed names stay prefixed)."""
    return f"{topic}{DLQ_SUFFIX}"


def resolve_prefix(prefix: str | None = None) -> str:
    """An explicit prefix wins (``""`` means none); otherwise ``SUANLI_TOPIC_PREFIX`` or none."""
    if prefix is not None:
        return prefix
    return os.environ.get(TOPIC_PREFIX_ENV, "")


def topic_name(name: str, prefix: str | None = None) -> str:
    """The physical topic name of catalogue topic ``name`` under ``prefix``."""
    resolved = resolve_prefix(prefix)
    return f"{resolved}.{name}" if resolved else name


NODE_SNAPSHOTS = TopicSpec(
    "node.snapshots",
    8,
    "node id",
    doc="Full-state snapshots from each node's sensing agent (devices, load, running tasks).",
)
LINKS_MEASURED = TopicSpec(
    "links.measured",
    4,
    "link id (source site -> target site)",
    doc="Raw network probe results between regions/sites.",
)
TASKS_LIFECYCLE = TopicSpec(
    "tasks.lifecycle",
    8,
    "task id",
    doc="Task started / finished / failed, reported by the node running it.",
)
USAGE_SAMPLES = TopicSpec(
    "usage.samples",
    8,
    "task id",
    doc="Periodic resource usage samples of running tasks.",
)
CAPACITY_NODES = TopicSpec(
    "capacity.nodes",
    4,
    "node id",
    CleanupPolicy.COMPACT,
    FOREVER_MS,
    doc="Materialized capacity view per node in compute units (latest value per node).",
)
NETWORK_LINKS = TopicSpec(
    "network.links",
    4,
    "link id (source site -> target site)",
    CleanupPolicy.COMPACT,
    FOREVER_MS,
    doc="Materialized network-state view per link (latency, jitter, loss, bandwidth).",
)
NODES_STATUS = TopicSpec(
    "nodes.status",
    4,
    "node id",
    CleanupPolicy.COMPACT,
    FOREVER_MS,
    doc="Node liveness (up / suspect / down), latest value per node.",
)
USAGE_METERED = TopicSpec(
    "usage.metered",
    4,
    "task id",
    doc="Usage normalised into compute units, ready for rating.",
)
JOBS_EVENTS = TopicSpec(
    "jobs.events",
    4,
    "job id",
    doc="Job lifecycle integration events from scheduling (submitted, cancelled, succeeded, failed).",
)
PLACEMENTS = TopicSpec(
    "placements",
    8,
    "node id",
    doc="Tasks placed on / preempted from a node; keyed by node so each agent reads its node in order.",
)
BILLING_EVENTS = TopicSpec(
    "billing.events",
    4,
    "tenant id",
    doc="Charges recorded and invoices issued.",
)

CATALOGUE: tuple[TopicSpec, ...] = (
    NODE_SNAPSHOTS,
    LINKS_MEASURED,
    TASKS_LIFECYCLE,
    USAGE_SAMPLES,
    CAPACITY_NODES,
    NETWORK_LINKS,
    NODES_STATUS,
    USAGE_METERED,
    JOBS_EVENTS,
    PLACEMENTS,
    BILLING_EVENTS,
)
BY_NAME: dict[str, TopicSpec] = {spec.name: spec for spec in CATALOGUE}


def spec(name: str) -> TopicSpec:
    """The catalogue entry for ``name``; a typo fails loudly instead of creating a stray topic."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown topic {name!r}; known: {', '.join(sorted(BY_NAME))}") from None
