"""Serving's domain values to and from contract records (Avro dicts) and stored state (JSON).

Shared by both adapters, so an in-memory unit of work writes exactly what a PostgreSQL one does: the
events for `services.events`, the orders as commands of `jobs.commands`, and the service's state row.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from suanli.contracts import encode, new_envelope
from suanli.eventstore import NewEvent, OutboxMessage
from suanli.serving.domain.autoscaling import ScaleDecision, ScalerInputs
from suanli.serving.domain.service import (
    CancelReplica,
    Decision,
    Event,
    Order,
    Replica,
    ReplicaState,
    Service,
    ServiceState,
    SubmitReplica,
)
from suanli.serving.domain.spec import ServiceSpec

PRODUCER = "serving"
STREAM_PREFIX = "service-"


def stream_of(service_id: str) -> str:
    return STREAM_PREFIX + service_id


def event_record(event: Event, event_id: uuid.UUID, at: datetime) -> tuple[str, dict[str, Any]]:
    """(event name, Avro record) of a domain event; the dataclass fields are the schema's own fields."""
    name = type(event).__name__
    return name, {
        **new_envelope(PRODUCER, event.service_id, event_id=event_id, occurred_at=at),
        **dataclasses.asdict(event),
    }


def order_record(order: Order, event_id: uuid.UUID, at: datetime) -> tuple[str, dict[str, Any]]:
    """The scheduler's command for an order (docs/commands.md), with serving as its principal."""
    envelope = new_envelope(PRODUCER, order.request_id, event_id=event_id, occurred_at=at)
    common = {"request_id": order.request_id, "tenant": order.tenant, "principal": PRODUCER}
    match order:
        case SubmitReplica():
            return "JobSubmissionRequested", {**envelope, **common, "spec": order.spec}
        case CancelReplica():
            return "JobCancellationRequested", {
                **envelope,
                **common,
                "job_id": order.job_id,
                "reason": order.reason,
            }


@dataclasses.dataclass(frozen=True, slots=True)
class Announcement:
    """What one decision writes through the event store: the stream's events and every outbox row."""

    events: list[NewEvent]
    outbox: list[OutboxMessage]


def announcement(
    decision: Decision,
    service_id: str,
    events_topic: str,
    commands_topic: str,
    new_id: Callable[[], uuid.UUID],
    at: datetime,
) -> Announcement:
    events, outbox = [], []
    for event in decision.events:
        name, record = event_record(event, new_id(), at)
        new = NewEvent(uuid.UUID(record["event_id"]), name, encode(name, record), {})
        events.append(new)
        outbox.append(OutboxMessage.for_event(events_topic, service_id.encode(), new))
    for order in decision.orders:
        name, record = order_record(order, new_id(), at)
        command = NewEvent(uuid.UUID(record["event_id"]), name, encode(name, record), {})
        outbox.append(OutboxMessage.for_event(commands_topic, order.request_id.encode(), command))
    return Announcement(events, outbox)


def state_of(service: Service) -> dict[str, Any]:
    """The service as its JSON state row (everything `service_from` needs to carry on deciding)."""
    return {
        "service_id": service.service_id,
        "tenant": service.tenant,
        "queue": service.queue,
        "name": service.name,
        "document": service.document,
        "desired": service.desired,
        "state": service.state.value,
        "next_seq": service.next_seq,
        "version": service.version,
        "replicas": [
            {**dataclasses.asdict(r), "state": r.state.value}
            for r in sorted(service.replicas.values(), key=lambda r: r.seq)
        ],
    }


def service_from(state: Mapping[str, Any]) -> Service:
    document = dict(state["document"])
    replicas = {
        r["replica_id"]: Replica(**{**r, "state": ReplicaState(r["state"])}) for r in state["replicas"]
    }
    return Service(
        service_id=state["service_id"],
        tenant=state["tenant"],
        queue=state["queue"],
        name=state["name"],
        document=document,
        # Validated when created; stored documents are read back without the device catalogue.
        spec=ServiceSpec.model_validate(document),
        desired=int(state["desired"]),
        state=ServiceState(state["state"]),
        next_seq=int(state["next_seq"]),
        replicas=replicas,
        version=int(state["version"]),
    )


def decision_of(decision: ScaleDecision) -> dict[str, Any]:
    """An autoscaler decision as a stored JSON document: inputs, model figures, counts and reason."""
    return {
        "at_s": decision.at_s,
        "autoscaler": decision.autoscaler,
        "current": decision.current,
        "desired": decision.desired,
        "reason": decision.reason,
        "inputs": dataclasses.asdict(decision.inputs),
        "model": [[name, value] for name, value in decision.model],
    }


def decision_from(stored: Mapping[str, Any]) -> ScaleDecision:
    return ScaleDecision(
        at_s=stored["at_s"],
        autoscaler=stored["autoscaler"],
        current=stored["current"],
        desired=stored["desired"],
        reason=stored["reason"],
        inputs=ScalerInputs(**stored["inputs"]),
        model=tuple((str(name), float(value)) for name, value in stored["model"]),
    )
