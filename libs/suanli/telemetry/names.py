"""The catalogue of metric names services export, and the port each service serves ``/metrics`` on.

Dashboards (``deploy/grafana``), the Prometheus scrape config (``deploy/prometheus``) and
``docs/operations.md`` are written against this catalogue, and tests hold them to it, so a renamed metric
breaks a test instead of silently emptying a panel.

Instrument names are the final Prometheus names. The OpenTelemetry Prometheus exporter appends a suffix
for the unit unless the name already ends in it (``s`` → ``_seconds``; any other plain unit, lower-cased:
``CU`` would serve ``suanli_capacity_cu_CU``) and ``_total`` to counters, so a catalogued name ends in
its unit's suffix and a counter's in ``_total``; units other than ``s`` are ``1`` or an annotation in
braces (``{CU}``), which adds nothing. ``tests/unit/telemetry/test_metric_names.py`` holds every entry
to what the exporter really serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

MetricKind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exported metric: its Prometheus name, kind, unit, labels and the service that exports it."""

    name: str
    kind: MetricKind
    unit: str
    labels: tuple[str, ...]
    exporter: str
    description: str


SCHEDULER_QUEUE_DEPTH = "suanli_scheduler_queue_depth"
SCHEDULER_PENDING_JOBS = "suanli_scheduler_pending_jobs"
SCHEDULER_DECISIONS = "suanli_scheduler_decisions_total"
SCHEDULER_CYCLE = "suanli_scheduler_cycle_seconds"
SCHEDULER_NETWORK_VIEW_AGE = "suanli_scheduler_network_view_age_seconds"
PLACEMENT_LATENCY = "suanli_placement_latency_seconds"
CAPACITY_CU = "suanli_capacity_cu"
UTILISATION_RATIO = "suanli_utilisation_ratio"
ALLOCATED_CU = "suanli_allocated_cu"
NODES = "suanli_nodes"
ROUTING_RESOLVES = "suanli_routing_resolves_total"
ROUTING_RESOLVE_LATENCY = "suanli_routing_resolve_seconds"
ROUTING_VIEW_FRESHNESS = "suanli_routing_view_freshness_seconds"
ROUTING_LINKS = "suanli_routing_links"
CONSUMER_LAG = "suanli_consumer_lag"
DEAD_LETTERED = "suanli_dead_lettered_total"
OUTBOX_PARKED = "suanli_outbox_parked_total"
SCHEDULER_LEADER = "suanli_scheduler_leader"
SCHEDULER_CAPACITY_VIEW_AGE = "suanli_scheduler_capacity_view_age_seconds"
OUTBOX_PENDING = "suanli_outbox_pending"
OUTBOX_OLDEST_AGE = "suanli_outbox_oldest_age_seconds"
CONSUMER_HANDLE = "suanli_consumer_handle_seconds"
CONSUMER_RETRIES = "suanli_consumer_retries_total"
AGENT_SNAPSHOTS = "suanli_agent_snapshots_total"
AGENT_REPORT_LATENCY = "suanli_agent_report_seconds"
AGENT_TASKS_RUNNING = "suanli_agent_tasks_running"
AGENT_ORDERS_REFUSED = "suanli_agent_orders_refused_total"
BILLING_CHARGES = "suanli_billing_charges_total"
PRUNED_ROWS = "suanli_pruned_rows_total"
METERING_LATE_FACTS = "suanli_metering_late_facts_total"
RPC_HANDLED = "suanli_rpc_server_handled_total"
RPC_HANDLING = "suanli_rpc_server_handling_seconds"

# Not ``service``: the scrape config labels every target with its service (deploy/prometheus), and a
# metric's own label of that name would be served renamed to ``exported_service``.
_RPC_LABELS = ("grpc_service", "grpc_method")
# The e2e run calls these two; the others (billing, serving, an agent's logs endpoint) serve the series
# from their first call on.
_RPC_EXPORTER = "scheduling, routing and every other gRPC server (suanli.telemetry.grpc), once called"

# Serving (docs/serving.md, "Metrics"): labelled by model, a name of the model catalogue
# (suanli.replica.models), never by service: a tenant can create services without bound.
SERVING_SERVICES = "suanli_serving_services"
SERVING_REPLICAS_DESIRED = "suanli_serving_replicas_desired"
SERVING_REPLICAS = "suanli_serving_replicas"
SERVING_SCALE_DECISIONS = "suanli_serving_scale_decisions_total"
SERVING_REPLICAS_STOPPED = "suanli_serving_replicas_stopped_total"
SERVING_LOAD_REPORTS = "suanli_serving_load_reports_total"
SERVING_IN_FLIGHT = "suanli_serving_in_flight"
SERVING_QUEUED = "suanli_serving_queued"
# The request gateway (`suanli gateway`, docs/inference.md): labelled by HTTP status code only, never by
# service, for the same reason.
GATEWAY_REQUESTS = "suanli_gateway_requests_total"
GATEWAY_LATENCY = "suanli_gateway_request_seconds"

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        SCHEDULER_QUEUE_DEPTH,
        "gauge",
        "1",
        ("queue",),
        "scheduling",
        "Jobs admitted to a queue and waiting for placement.",
    ),
    MetricSpec(
        SCHEDULER_PENDING_JOBS,
        "gauge",
        "1",
        ("queue", "reason"),
        "scheduling",
        "Jobs left unplaced by the last cycle, by the precise reason (quota, capacity, affinity, ...).",
    ),
    MetricSpec(
        SCHEDULER_DECISIONS,
        "counter",
        "1",
        ("outcome",),
        "scheduling",
        "Scheduling decisions by outcome (placed, preempted, rejected, requeued).",
    ),
    MetricSpec(
        SCHEDULER_CYCLE,
        "histogram",
        "s",
        (),
        "scheduling",
        "Wall time of one scheduling cycle over a snapshot.",
    ),
    MetricSpec(
        SCHEDULER_NETWORK_VIEW_AGE,
        "gauge",
        "s",
        (),
        "scheduling",
        "Seconds since the scheduler's network view last heard from routing (network.links); grows while "
        "routing is down and placement uses the last snapshot.",
    ),
    MetricSpec(
        PLACEMENT_LATENCY,
        "histogram",
        "s",
        ("region",),
        "scheduling",
        "Time from a job's submission to its placement.",
    ),
    MetricSpec(
        CAPACITY_CU,
        "gauge",
        "{CU}",
        ("region", "gpu_model"),
        "metering",
        "Allocatable capacity in standard compute units of live nodes.",
    ),
    MetricSpec(
        ALLOCATED_CU,
        "gauge",
        "{CU}",
        ("region", "gpu_model"),
        "metering",
        "Standard compute units of live nodes allocated to placed tasks (above capacity when "
        "oversubscribed).",
    ),
    MetricSpec(
        UTILISATION_RATIO,
        "gauge",
        "1",
        ("region",),
        "metering",
        "Allocated over allocatable compute units, 0..1 (may exceed 1 when oversubscribed).",
    ),
    MetricSpec(
        NODES,
        "gauge",
        "1",
        ("region", "status"),
        "metering",
        "Nodes by liveness status (ready, suspect, lost).",
    ),
    MetricSpec(
        ROUTING_RESOLVES,
        "counter",
        "1",
        ("kind", "outcome"),
        "routing",
        "Resolve calls by workload kind and outcome (routed: some candidate fits, none, invalid).",
    ),
    MetricSpec(
        ROUTING_RESOLVE_LATENCY,
        "histogram",
        "s",
        (),
        "routing",
        "Server-side time of one Resolve, from the request to the ranked answer.",
    ),
    MetricSpec(
        ROUTING_VIEW_FRESHNESS,
        "histogram",
        "s",
        (),
        "routing",
        "Network-view freshness: a probe round's occurred_at to the NetworkLinkChanged it caused.",
    ),
    MetricSpec(
        ROUTING_LINKS,
        "gauge",
        "1",
        ("scope", "status"),
        "routing",
        "Links in the network view by scope (site, region) and status (ok, degraded, down).",
    ),
    MetricSpec(
        CONSUMER_LAG,
        "gauge",
        "1",
        ("group", "topic"),
        "every consumer: the bus's (scheduling, billing, sensing) and the faust workers' (metering, routing)",
        "Records between a consumer group's position and the partition end, summed over partitions.",
    ),
    MetricSpec(
        DEAD_LETTERED,
        "counter",
        "1",
        ("topic", "reason"),
        "every consumer (bus)",
        "Records sent to a topic's dead-letter topic.",
    ),
    MetricSpec(
        OUTBOX_PARKED,
        "counter",
        "1",
        ("topic",),
        "every outbox relay (event store)",
        "Outbox rows the relay parked because the broker refused them (see `suanli outbox parked`).",
    ),
    MetricSpec(
        SCHEDULER_LEADER,
        "gauge",
        "1",
        (),
        "scheduling",
        "1 while this scheduling instance holds the leader lease, 0 while it stands by.",
    ),
    MetricSpec(
        SCHEDULER_CAPACITY_VIEW_AGE,
        "gauge",
        "s",
        (),
        "scheduling",
        "Seconds since the scheduler's capacity view last heard a node record (capacity.nodes, nodes.status, "
        "node.snapshots); grows while metering or the agents are silent.",
    ),
    MetricSpec(
        OUTBOX_PENDING,
        "gauge",
        "1",
        (),
        "scheduling, billing (outbox relay)",
        "Unpublished outbox rows the relay found on its last read, at most its batch size (500): at the cap "
        "the outbox holds at least that many.",
    ),
    MetricSpec(
        OUTBOX_OLDEST_AGE,
        "gauge",
        "s",
        (),
        "scheduling, billing (outbox relay)",
        "Age of the oldest outbox row not yet published, 0 once the relay has caught up; grows while the "
        "relay cannot publish (broker away, lease lost).",
    ),
    MetricSpec(
        CONSUMER_HANDLE,
        "histogram",
        "s",
        ("group", "topic"),
        "every consumer: the bus's (scheduling, billing, sensing) and the faust workers' (metering, routing)",
        "Time to handle one record, retries included (rate: its _count; errors: retries and dead letters); "
        "a faust worker's record: the time of the batch it was handled in.",
    ),
    MetricSpec(
        CONSUMER_RETRIES,
        "counter",
        "1",
        ("group", "topic"),
        "every consumer: the bus's (scheduling, billing, sensing) and the faust workers' (metering, routing)",
        "Handler failures retried in place (transient: the database or broker away).",
    ),
    MetricSpec(
        AGENT_SNAPSHOTS,
        "counter",
        "1",
        ("outcome",),
        "sensing",
        "NodeSnapshots the agent sent (outcome sent) or failed to send (failed: retried next turn).",
    ),
    MetricSpec(
        AGENT_REPORT_LATENCY,
        "histogram",
        "s",
        (),
        "sensing",
        "Time for one report slice's snapshots and usage samples to be acknowledged by the broker.",
    ),
    MetricSpec(
        AGENT_TASKS_RUNNING,
        "gauge",
        "1",
        (),
        "sensing",
        "Tasks running on the nodes this agent hosts.",
    ),
    MetricSpec(
        AGENT_ORDERS_REFUSED,
        "counter",
        "1",
        (),
        "sensing",
        "Placements the agent refused (the devices or resources were not free on the node).",
    ),
    MetricSpec(
        BILLING_CHARGES,
        "counter",
        "1",
        ("tenant",),
        "billing",
        "Charges billing recorded, by the tenant charged: usage windows rated as they arrived or released "
        "from parking.",
    ),
    MetricSpec(
        PRUNED_ROWS,
        "counter",
        "1",
        ("table",),
        "every outbox relay, every consumer of processed_events, metering",
        "Rows removed by the pruning jobs past their retention: outbox (published rows), processed_events "
        "(de-duplication records), metering_tasks (finished tasks of metering's task table).",
    ),
    MetricSpec(
        METERING_LATE_FACTS,
        "counter",
        "1",
        ("fact",),
        "metering",
        "Task facts metering ignored (by kind: Started, Ended, Sampled, Seen) because they are older than "
        "the task retention and their attempt is not held: its record was pruned; never charged again.",
    ),
    MetricSpec(
        SERVING_SERVICES,
        "gauge",
        "1",
        ("model",),
        "serving",
        "Live (not deleted) inference services by model, read from serving's table every 5 s.",
    ),
    MetricSpec(
        SERVING_REPLICAS_DESIRED,
        "gauge",
        "1",
        ("model",),
        "serving",
        "Replicas the live services want, summed by model.",
    ),
    MetricSpec(
        SERVING_REPLICAS,
        "gauge",
        "1",
        ("model", "state"),
        "serving",
        "Replicas of live services by model and state (requested, pending, placed, running, releasing); "
        "placed and running are on a node.",
    ),
    MetricSpec(
        SERVING_SCALE_DECISIONS,
        "counter",
        "1",
        ("reason",),
        "serving",
        "Replica-count changes serving committed (ServiceScaled) by reason: created, manual, autoscaler, "
        "replica-replaced (a replica's job ended and a new one was asked for).",
    ),
    MetricSpec(
        SERVING_REPLICAS_STOPPED,
        "counter",
        "1",
        ("cause",),
        "serving",
        "Replicas whose job stopped (ReplicaStopped) by cause: failed, finished, cancelled, refused, "
        "requeued (the scheduler places it again).",
    ),
    MetricSpec(
        SERVING_LOAD_REPORTS,
        "counter",
        "1",
        ("outcome",),
        "serving",
        "Replica load reports read from services.load: kept, or outdated (a newer one of the replica was "
        "held); malformed ones are dead-lettered.",
    ),
    MetricSpec(
        SERVING_IN_FLIGHT,
        "gauge",
        "1",
        ("model",),
        "serving",
        "Requests in flight on the replicas of live services by model, from their fresh load reports "
        "(0 while none report).",
    ),
    MetricSpec(
        SERVING_QUEUED,
        "gauge",
        "1",
        ("model",),
        "serving",
        "Requests queued at the replicas of live services by model, from their fresh load reports.",
    ),
    MetricSpec(
        GATEWAY_REQUESTS,
        "counter",
        "1",
        ("code",),
        "gateway",
        "Generate requests the gateway answered, by HTTP status code: 200 (the replica's answer), 503 (no "
        "fresh replica), 502 (replicas unreachable), 404 (unknown service), 400, or the replica's own code.",
    ),
    MetricSpec(
        GATEWAY_LATENCY,
        "histogram",
        "s",
        ("code",),
        "gateway",
        "Time from a generate request's arrival at the gateway to its answer, by HTTP status code: the "
        "replica's generation time plus the gateway's own (resolve, forward).",
    ),
    MetricSpec(
        RPC_HANDLED,
        "counter",
        "1",
        (*_RPC_LABELS, "grpc_code"),
        _RPC_EXPORTER,
        "Unary and server-streaming calls a gRPC server finished, by method and status code (OK, "
        "NOT_FOUND, UNAVAILABLE, ...); health checks are left out.",
    ),
    MetricSpec(
        RPC_HANDLING,
        "histogram",
        "s",
        _RPC_LABELS,
        _RPC_EXPORTER,
        "Server-side time of one call, from the request to its status: a stream's until it ends.",
    ),
)

METRICS_BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}


class Described(TypedDict):
    """An instrument's unit and description, as ``create_*`` takes them."""

    unit: str
    description: str


def described(name: str) -> Described:
    """The catalogue's unit and description of ``name``: ``meter.create_gauge(name, **described(name))``."""
    spec = METRICS_BY_NAME[name]
    return {"unit": spec.unit, "description": spec.description}


# One fixed port per service so the Prometheus scrape config is static; a process that runs several
# services (the demo) passes its own ports.
METRICS_PORTS: dict[str, int] = {
    "sensing": 9101,
    "metering": 9102,
    "routing": 9103,
    "scheduling": 9104,
    "billing": 9105,
    "serving": 9106,
}
