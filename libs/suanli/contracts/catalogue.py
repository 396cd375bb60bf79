"""The one catalogue of topics and integration events, in code (ARCHITECTURE §1).

Topics: one `TopicSpec` per Kafka topic (partitions, key, cleanup policy, retention), the dead-letter
convention beside it. Events: one `EventSpec` per ``schemas/avro/<context>/<Event>.avsc``, naming the
topic it travels on and the record field used as the Kafka key, so ordering per key holds (all events
about one node on one partition, and so on). A unit test holds schema files and events in step.

This module is pure data. `suanli.bus.topics` reads it and adds what depends on the deployment (the
topic prefix from the environment); nothing else lists topics.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final

DLQ_SUFFIX: Final = ".dlq"

DAY_MS: Final = 24 * 60 * 60 * 1000
# Compacted views keep the latest value per key forever; Kafka spells "no time limit" as -1.
FOREVER_MS: Final = -1
# Dead letters wait for a human: keep them longer than any source topic.
DLQ_RETENTION_MS: Final = 30 * DAY_MS


class CleanupPolicy(StrEnum):
    """Kafka's ``cleanup.policy``: expire old records, or keep the latest per key."""

    DELETE = "delete"
    COMPACT = "compact"


def dlq_topic(topic: str) -> str:
    """Dead-letter topic of ``topic`` (already prefixed names stay prefixed)."""
    return f"{topic}{DLQ_SUFFIX}"


def qualified(name: str, prefix: str) -> str:
    """``name`` in the namespace ``prefix`` (``""``: no namespace)."""
    return f"{prefix}.{name}" if prefix else name


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One Kafka topic: how many partitions, what its key is, and how long records are kept."""

    name: str
    partitions: int
    key: str
    cleanup_policy: CleanupPolicy = CleanupPolicy.DELETE
    retention_ms: int = 7 * DAY_MS
    doc: str = ""

    @property
    def dlq(self) -> str:
        """Name of this topic's dead-letter topic."""
        return dlq_topic(self.name)

    @property
    def configs(self) -> dict[str, str]:
        """Topic configs passed at creation (the only time Tansu accepts them: no AlterConfigs)."""
        return {"cleanup.policy": self.cleanup_policy.value, "retention.ms": str(self.retention_ms)}

    def dlq_spec(self) -> TopicSpec:
        """The dead-letter topic of this one."""
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
        """This topic in the namespace ``prefix`` (``""``: unchanged)."""
        return replace(self, name=qualified(self.name, prefix))


# Topic names. Compacted views (capacity.nodes, network.links, nodes.status) keep the latest value per key.
NODE_SNAPSHOTS: Final = "node.snapshots"
LINKS_MEASURED: Final = "links.measured"
TASKS_LIFECYCLE: Final = "tasks.lifecycle"
USAGE_SAMPLES: Final = "usage.samples"
CAPACITY_NODES: Final = "capacity.nodes"
NETWORK_LINKS: Final = "network.links"
NODES_STATUS: Final = "nodes.status"
USAGE_METERED: Final = "usage.metered"
JOBS_EVENTS: Final = "jobs.events"
JOBS_COMMANDS: Final = "jobs.commands"
JOBS_REPLIES: Final = "jobs.replies"
PLACEMENTS: Final = "placements"
QUEUES_EVENTS: Final = "queues.events"
BILLING_EVENTS: Final = "billing.events"
AUTH_EVENTS: Final = "auth.events"
SERVICES_EVENTS: Final = "services.events"
SERVICES_LOAD: Final = "services.load"

TOPIC_SPECS: Final[tuple[TopicSpec, ...]] = (
    TopicSpec(
        NODE_SNAPSHOTS,
        8,
        "node id",
        doc="Full-state snapshots from each node's sensing agent (devices, load, running tasks).",
    ),
    TopicSpec(
        LINKS_MEASURED,
        4,
        "link id (source site -> target site)",
        doc="Raw network probe results between regions/sites.",
    ),
    TopicSpec(
        TASKS_LIFECYCLE,
        8,
        "task id",
        doc="Task started / finished / failed, reported by the node running it.",
    ),
    TopicSpec(USAGE_SAMPLES, 8, "task id", doc="Periodic resource usage samples of running tasks."),
    TopicSpec(
        CAPACITY_NODES,
        4,
        "node id",
        CleanupPolicy.COMPACT,
        FOREVER_MS,
        doc="Materialized capacity view per node in compute units (latest value per node).",
    ),
    TopicSpec(
        NETWORK_LINKS,
        4,
        "link id (source site -> target site)",
        CleanupPolicy.COMPACT,
        FOREVER_MS,
        doc="Materialized network-state view per link (latency, jitter, loss, bandwidth).",
    ),
    TopicSpec(
        NODES_STATUS,
        4,
        "node id",
        CleanupPolicy.COMPACT,
        FOREVER_MS,
        doc="Node liveness (up / suspect / down), latest value per node.",
    ),
    TopicSpec(USAGE_METERED, 4, "task id", doc="Usage normalised into compute units, ready for rating."),
    TopicSpec(
        JOBS_EVENTS,
        4,
        "job id",
        doc="Job lifecycle integration events from scheduling (submitted, cancelled, succeeded, failed).",
    ),
    # Commands from trusted upstream producers (docs/commands.md); keyed by request_id, so a command sent
    # twice lands on one partition and is answered in order.
    TopicSpec(
        JOBS_COMMANDS,
        4,
        "request id",
        doc="Job commands from upstream systems: submit and cancel, handled by the scheduling leader.",
    ),
    TopicSpec(
        JOBS_REPLIES,
        4,
        "request id",
        doc="The scheduler's answer to each command of jobs.commands, keyed by its request id.",
    ),
    TopicSpec(
        PLACEMENTS,
        8,
        "node id",
        doc="Tasks placed on / preempted from a node; keyed by node so each agent reads its node in order.",
    ),
    # One partition: administration is rare, and an auditor reads it in order.
    TopicSpec(
        QUEUES_EVENTS,
        1,
        "queue or priority class name",
        retention_ms=365 * DAY_MS,
        doc="Queue administration: queues created, updated, deleted; priority classes set and deleted.",
    ),
    TopicSpec(BILLING_EVENTS, 4, "tenant id", doc="Charges recorded and invoices issued."),
    # One partition: a handful of records a day, read in order by auditors.
    TopicSpec(
        AUTH_EVENTS,
        1,
        "token or key id",
        retention_ms=365 * DAY_MS,
        doc="Tokens issued and revoked, signing keys added and retired (the auth event store's outbox).",
    ),
    TopicSpec(
        SERVICES_EVENTS,
        4,
        "service id",
        doc="Inference services and their replicas: created, scaled, deleted; replicas requested, placed.",
    ),
    # Full-state reports every few seconds: a lost or repeated one heals with the next; kept a day.
    TopicSpec(
        SERVICES_LOAD,
        4,
        "service id",
        retention_ms=DAY_MS,
        doc="Each replica's load (in flight, queued, latency, free KV cache), reported every interval.",
    ),
)
TOPICS_BY_NAME: Final = MappingProxyType({t.name: t for t in TOPIC_SPECS})


def topic_spec(name: str) -> TopicSpec:
    """The catalogue entry of topic ``name``; a typo fails loudly instead of creating a stray topic."""
    try:
        return TOPICS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown topic {name!r}; known: {', '.join(sorted(TOPICS_BY_NAME))}") from None


CONTEXTS: Final[tuple[str, ...]] = (
    "sensing",
    "execution",
    "metering",
    "routing",
    "scheduling",
    "billing",
    "auth",
    "serving",
)

# The envelope every event starts with, in this order and with these Avro types (logical types kept).
ENVELOPE_FIELDS: Final[tuple[tuple[str, object], ...]] = (
    ("event_id", "string"),
    ("occurred_at", {"type": "long", "logicalType": "timestamp-millis"}),
    ("producer", "string"),
    ("subject_id", "string"),
)


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One integration event: its bounded context, the topic it travels on and its Kafka key field."""

    name: str
    context: str
    topic: str
    key: str  # record field whose value is the Kafka key

    @property
    def full_name(self) -> str:
        """The Avro full name (``suanli.<context>.<Event>``)."""
        return f"suanli.{self.context}.{self.name}"


def _spec(name: str, context: str, topic: str, key: str) -> tuple[str, EventSpec]:
    return name, EventSpec(name, context, topic_spec(topic).name, key)


EVENTS: Final = MappingProxyType(
    dict(
        [
            # sensing: node agents and probes
            _spec("NodeRegistered", "sensing", NODE_SNAPSHOTS, "node_id"),
            _spec("NodeSnapshot", "sensing", NODE_SNAPSHOTS, "node_id"),
            _spec("LinkMeasured", "sensing", LINKS_MEASURED, "src_site"),
            # execution: the task runner inside the node agent
            _spec("TaskStarted", "execution", TASKS_LIFECYCLE, "task_id"),
            _spec("TaskFinished", "execution", TASKS_LIFECYCLE, "task_id"),
            _spec("TaskFailed", "execution", TASKS_LIFECYCLE, "task_id"),
            _spec("UsageSampled", "execution", USAGE_SAMPLES, "task_id"),
            # metering
            _spec("NodeCapacityChanged", "metering", CAPACITY_NODES, "node_id"),
            _spec("NodeStatusChanged", "metering", NODES_STATUS, "node_id"),
            _spec("UsageMetered", "metering", USAGE_METERED, "task_id"),
            # routing: the network-state view
            _spec("NetworkLinkChanged", "routing", NETWORK_LINKS, "link_id"),
            # scheduling
            _spec("JobSubmitted", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobCancelled", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobSucceeded", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobFailed", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobRequeued", "scheduling", JOBS_EVENTS, "job_id"),
            # The command topic (commands are requests, named for the fact that one was made) and replies.
            _spec("JobSubmissionRequested", "scheduling", JOBS_COMMANDS, "request_id"),
            _spec("JobCancellationRequested", "scheduling", JOBS_COMMANDS, "request_id"),
            _spec("JobCommandAnswered", "scheduling", JOBS_REPLIES, "request_id"),
            # Placements and preemptions are keyed by node: each agent reads its node's orders in order.
            _spec("TaskPlaced", "scheduling", PLACEMENTS, "node_id"),
            _spec("TaskPreempted", "scheduling", PLACEMENTS, "node_id"),
            _spec("TaskStopRequested", "scheduling", PLACEMENTS, "node_id"),
            # Queue administration (the queue set is rebuilt from these; docs/queues.md).
            _spec("QueueCreated", "scheduling", QUEUES_EVENTS, "name"),
            _spec("QueueUpdated", "scheduling", QUEUES_EVENTS, "name"),
            _spec("QueueDeleted", "scheduling", QUEUES_EVENTS, "name"),
            _spec("PriorityClassDefined", "scheduling", QUEUES_EVENTS, "name"),
            _spec("PriorityClassDeleted", "scheduling", QUEUES_EVENTS, "name"),
            # billing
            _spec("ChargeRecorded", "billing", BILLING_EVENTS, "tenant"),
            _spec("InvoiceIssued", "billing", BILLING_EVENTS, "tenant"),
            # auth: the token ledger (suanli.auth.ledger)
            _spec("TokenIssued", "auth", AUTH_EVENTS, "token_id"),
            _spec("TokenRevoked", "auth", AUTH_EVENTS, "token_id"),
            _spec("SigningKeyAdded", "auth", AUTH_EVENTS, "key_id"),
            _spec("SigningKeyRetired", "auth", AUTH_EVENTS, "key_id"),
            # serving: inference services (docs/serving.md)
            _spec("ServiceCreated", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ServiceScaled", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ServiceDeleted", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaRequested", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaSubmitted", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaPlaced", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaStarted", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaStopped", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaReleased", "serving", SERVICES_EVENTS, "service_id"),
            _spec("ReplicaLoadReported", "serving", SERVICES_LOAD, "service_id"),
        ]
    )
)

# The topics catalogued events travel on, in catalogue order.
TOPICS: Final[tuple[str, ...]] = tuple(
    t.name for t in TOPIC_SPECS if any(e.topic == t.name for e in EVENTS.values())
)


def spec(event_name: str) -> EventSpec:
    """The catalogue entry of ``event_name``; ``KeyError`` names the unknown event."""
    try:
        return EVENTS[event_name]
    except KeyError:
        raise KeyError(f"event {event_name!r} is not in the catalogue") from None


def context_of(event_name: str) -> str:
    """The bounded context that owns ``event_name``."""
    return spec(event_name).context


def topic_of(event_name: str) -> str:
    """The topic ``event_name`` travels on."""
    return spec(event_name).topic


def events_on(topic: str) -> tuple[str, ...]:
    """Names of the events that travel on ``topic``, in catalogue order."""
    return tuple(name for name, s in EVENTS.items() if s.topic == topic)
