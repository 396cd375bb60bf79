"""Contract records (decoded Avro dicts) to the core's values and back; the only place that knows both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from suanli.clock import from_ms, to_ms
from suanli.contracts import new_envelope
from suanli.metering.domain import (
    DeviceShare,
    Ended,
    JobKnown,
    NodeAllocation,
    NodeCapacity,
    Resources,
    Sampled,
    Started,
    StatusChange,
    TaskFact,
    UsageWindow,
    derived_id,
)

PRODUCER = "metering"
Record = Mapping[str, Any]


def allocation_of(record: Record) -> NodeAllocation:
    """TaskPlaced -> what it binds on the node."""
    requests = record["requests"]
    return NodeAllocation(
        task_id=record["task_id"],
        job_id=record["job_id"],
        attempt=record["attempt"],
        node_id=record["node_id"],
        devices=tuple(DeviceShare(d["index"], d["milli"]) for d in record["devices"]),
        cpu_milli=requests["cpu_milli"],
        memory_mib=requests["memory_mib"],
        gpu_memory_mib=requests.get("gpu_memory_mib") or 0,
        placed_at_ms=to_ms(record["occurred_at"]),
    )


def preempted_fact(record: Record) -> Ended:
    return Ended(record["task_id"], record["attempt"], to_ms(record["occurred_at"]), "preempted")


_ENDINGS = {"TaskFinished": "finished", "TaskFailed": "failed"}


def lifecycle_fact(event_name: str, record: Record) -> TaskFact | None:
    """TaskStarted / TaskFinished / TaskFailed -> a fact; None for events metering does not need."""
    at = to_ms(record["occurred_at"])
    if event_name == "TaskStarted":
        return Started(record["task_id"], record["job_id"], record["attempt"], record["node_id"], at)
    if event_name in _ENDINGS:
        return Ended(record["task_id"], record["attempt"], at, _ENDINGS[event_name])
    return None


def sample_fact(record: Record) -> Sampled:
    return Sampled(
        task_id=record["task_id"],
        attempt=record["attempt"],
        at_ms=to_ms(record["occurred_at"]),
        interval_ms=record["interval_ms"],
        gpu_utilisation_pct=record["gpu_utilisation_pct"],
        device_count=len(record.get("device_indices") or ()),
        cpu_milli=record["cpu_milli"],
    )


def job_facts(record: Record) -> list[JobKnown]:
    """JobSubmitted -> who each of its tasks is charged to."""
    return [
        JobKnown(t["task_id"], record["job_id"], record["tenant"], record["queue"]) for t in record["tasks"]
    ]


def payer_of(record: Record) -> list[JobKnown]:
    """TaskPlaced -> who its task is charged to; none for a placement that does not say (older versions)."""
    tenant, queue = record.get("tenant") or "", record.get("queue") or ""
    if not (tenant and queue):
        return []
    return [JobKnown(record["task_id"], record["job_id"], tenant, queue)]


def _resources(r: Resources) -> dict[str, int]:
    return {
        "cpu_milli": r.cpu_milli,
        "memory_mib": r.memory_mib,
        "gpu_count": r.gpu_count,
        "gpu_milli": r.gpu_milli,
        "gpu_memory_mib": r.gpu_memory_mib,
    }


def capacity_record(cap: NodeCapacity, *, source_event_id: str, occurred_at_ms: int) -> dict[str, Any]:
    """NodeCapacityChanged; its id derives from the snapshot it was built from."""
    return {
        **new_envelope(
            PRODUCER,
            cap.node_id,
            event_id=derived_id("capacity", source_event_id),
            occurred_at=from_ms(occurred_at_ms),
        ),
        "node_id": cap.node_id,
        "region": cap.region,
        "zone": cap.zone,
        "site": cap.site,
        "total": _resources(cap.total),
        "allocatable": _resources(cap.allocatable),
        "used": _resources(cap.used),
        "cu_total": cap.cu_total,
        "cu_allocatable": cap.cu_allocatable,
        "cu_used": cap.cu_used,
        "devices": [
            {
                "index": d.index,
                "uuid": d.uuid,
                "model": d.model,
                "device_class": d.device_class,
                "cu": d.cu,
                "memory_total_mib": d.memory_total_mib,
                "memory_free_mib": d.memory_free_mib,
                "milli_free": d.milli_free,
                "healthy": d.healthy,
            }
            for d in cap.devices
        ],
    }


def status_record(change: StatusChange) -> dict[str, Any]:
    return {
        **new_envelope(PRODUCER, change.node_id, event_id=change.event_id, occurred_at=from_ms(change.at_ms)),
        "node_id": change.node_id,
        "status": change.status.value,
        "previous_status": change.previous.value if change.previous is not None else None,
        "reason": change.reason,
        "last_seen_at": from_ms(change.last_seen_at_ms),
    }


def usage_record(window: UsageWindow) -> dict[str, Any]:
    """UsageMetered; stamped with the window's end, so a replay writes identical records."""
    c = window.charge
    return {
        **new_envelope(PRODUCER, c.task_id, event_id=window.event_id, occurred_at=from_ms(window.end_ms)),
        "task_id": c.task_id,
        "job_id": c.job_id,
        "tenant": c.tenant,
        "queue": c.queue,
        "node_id": window.node_id,
        "window_start": from_ms(window.start_ms),
        "window_end": from_ms(window.end_ms),
        "cu_seconds": dict(window.cu_seconds),
        "gpu_milli_seconds": window.gpu_milli_seconds,
        "cpu_milli_seconds": window.cpu_milli_seconds,
        "attempt": c.attempt,
        "efficiency": window.efficiency,
    }
