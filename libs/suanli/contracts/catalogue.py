"""The one catalogue of integration events and topics, in code (ARCHITECTURE §1).

Every ``schemas/avro/<context>/<Event>.avsc`` has an entry here and every entry has a file; a unit test holds
both directions. ``key`` names the record field used as the Kafka message key, so ordering per key holds
(all events about one node on one partition, and so on).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# Topic names. Compacted views (capacity.nodes, nodes.status) are keyed by node id.
NODE_SNAPSHOTS: Final = "node.snapshots"
LINKS_MEASURED: Final = "links.measured"
TASKS_LIFECYCLE: Final = "tasks.lifecycle"
USAGE_SAMPLES: Final = "usage.samples"
CAPACITY_NODES: Final = "capacity.nodes"
NODES_STATUS: Final = "nodes.status"
USAGE_METERED: Final = "usage.metered"
JOBS_EVENTS: Final = "jobs.events"
PLACEMENTS: Final = "placements"
BILLING_EVENTS: Final = "billing.events"

TOPICS: Final[tuple[str, ...]] = (
    NODE_SNAPSHOTS,
    LINKS_MEASURED,
    TASKS_LIFECYCLE,
    USAGE_SAMPLES,
    CAPACITY_NODES,
    NODES_STATUS,
    USAGE_METERED,
    JOBS_EVENTS,
    PLACEMENTS,
    BILLING_EVENTS,
)

CONTEXTS: Final[tuple[str, ...]] = ("sensing", "execution", "metering", "scheduling", "billing")

# The envelope every event starts with, in this order and with these Avro types (logical types kept).
ENVELOPE_FIELDS: Final[tuple[tuple[str, object], ...]] = (
    ("event_id", "string"),
    ("occurred_at", {"type": "long", "logicalType": "timestamp-millis"}),
    ("producer", "string"),
    ("subject_id", "string"),
)


@dataclass(frozen=True, slots=True)
class EventSpec:
    name: str
    context: str
    topic: str
    key: str  # record field whose value is the Kafka key

    @property
    def full_name(self) -> str:
        return f"suanli.{self.context}.{self.name}"


def _spec(name: str, context: str, topic: str, key: str) -> tuple[str, EventSpec]:
    return name, EventSpec(name, context, topic, key)


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
            # scheduling
            _spec("JobSubmitted", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobCancelled", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobSucceeded", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobFailed", "scheduling", JOBS_EVENTS, "job_id"),
            _spec("JobRequeued", "scheduling", JOBS_EVENTS, "job_id"),
            # Placements and preemptions are keyed by node: each agent reads its node's orders in order.
            _spec("TaskPlaced", "scheduling", PLACEMENTS, "node_id"),
            _spec("TaskPreempted", "scheduling", PLACEMENTS, "node_id"),
            _spec("TaskStopRequested", "scheduling", PLACEMENTS, "node_id"),
            # billing
            _spec("ChargeRecorded", "billing", BILLING_EVENTS, "tenant"),
            _spec("InvoiceIssued", "billing", BILLING_EVENTS, "tenant"),
        ]
    )
)


def spec(event_name: str) -> EventSpec:
    """The catalogue entry of ``event_name``; ``KeyError`` names the unknown event."""
    try:
        return EVENTS[event_name]
    except KeyError:
        raise KeyError(f"event {event_name!r} is not in the catalogue") from None


def context_of(event_name: str) -> str:
    return spec(event_name).context


def topic_of(event_name: str) -> str:
    return spec(event_name).topic


def events_on(topic: str) -> tuple[str, ...]:
    """Names of the events that travel on ``topic``, in catalogue order."""
    return tuple(name for name, s in EVENTS.items() if s.topic == topic)
