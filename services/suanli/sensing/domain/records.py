"""Contract records (plain dicts for `suanli.contracts.encode`) built from the agent's domain values.

Pure: the event id and the time are arguments. Where a schema field cannot say "unknown" (utilisation,
temperature, used memory), an unreported metric is sent as 0; power and MIG are nullable and stay null.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from suanli.contracts import new_envelope
from suanli.contracts.load import ReplicaLoad, load_record
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.links import LinkSample
from suanli.sensing.domain.observation import DeviceObservation, NodeObservation
from suanli.sensing.domain.tasks import TaskEvent, TaskFailed, TaskFinished, TaskStarted

Record = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Stamp:
    """Envelope inputs from the injected id factory and clock."""

    event_id: str
    at: dt.datetime


@dataclass(frozen=True, slots=True)
class TaskUsage:
    """Resource use of one task over one interval."""

    gpu_utilisation_pct: float = 0.0
    gpu_memory_used_mib: int = 0
    cpu_milli: int = 0
    memory_used_mib: int = 0


def _envelope(identity: NodeIdentity, subject_id: str, stamp: Stamp) -> Record:
    return new_envelope(identity.producer, subject_id, event_id=stamp.event_id, occurred_at=stamp.at)


def _location(identity: NodeIdentity) -> Record:
    return {
        "node_id": identity.node_id,
        "region": identity.region,
        "zone": identity.zone,
        "site": identity.site,
    }


def node_registered(
    identity: NodeIdentity, observation: NodeObservation, labels: Mapping[str, str], stamp: Stamp
) -> Record:
    return {
        **_envelope(identity, identity.node_id, stamp),
        **_location(identity),
        "labels": {**identity.labels, **labels},
        "cpu_milli": observation.host.cpu_cores * 1000,
        "memory_mib": observation.host.memory_total_mib,
        "devices": [
            {
                "index": d.index,
                "uuid": d.uuid,
                "model": d.model,
                "memory_total_mib": d.memory_total_mib,
            }
            for d in observation.devices
        ],
    }


def node_snapshot(
    identity: NodeIdentity,
    observation: NodeObservation,
    *,
    labels: Mapping[str, str],
    sequence: int,
    interval_ms: int,
    task_ids: Iterable[str],
    stamp: Stamp,
) -> Record:
    host = observation.host
    return {
        **_envelope(identity, identity.node_id, stamp),
        **_location(identity),
        "labels": {**identity.labels, **labels},
        "sequence": sequence,
        "report_interval_ms": interval_ms,
        "host": {
            "cpu_cores": host.cpu_cores,
            "cpu_utilisation_pct": float(host.cpu_utilisation_pct),
            "memory_total_mib": host.memory_total_mib,
            "memory_used_mib": host.memory_used_mib,
        },
        "devices": [_device_state(d) for d in observation.devices],
        "task_ids": list(task_ids),
    }


def _device_state(d: DeviceObservation) -> Record:
    return {
        "index": d.index,
        "uuid": d.uuid,
        "model": d.model,
        "memory_total_mib": d.memory_total_mib,
        "memory_used_mib": d.memory_used_mib or 0,
        "utilisation_pct": float(d.utilisation_pct or 0.0),
        "temperature_c": float(d.temperature_c or 0.0),
        "power_w": None if d.power_w is None else float(d.power_w),
        "mig_instances": None
        if d.mig_instances is None
        else [
            {
                "gpu_instance_id": m.gpu_instance_id,
                "compute_instance_id": m.compute_instance_id,
                "uuid": m.uuid,
                "profile": m.profile,
                "memory_total_mib": m.memory_total_mib,
            }
            for m in d.mig_instances
        ],
    }


def task_event(identity: NodeIdentity, event: TaskEvent, stamp: Stamp) -> tuple[str, Record]:
    """``(event name, record)`` of a task table event."""
    p = event.placement
    base = {
        **_envelope(identity, p.task_id, stamp),
        "task_id": p.task_id,
        "job_id": p.job_id,
        "node_id": identity.node_id,
        "attempt": p.attempt,
    }
    if isinstance(event, TaskStarted):
        return "TaskStarted", {**base, "device_indices": list(p.device_indices), "pid": event.pid}
    if isinstance(event, TaskFinished):
        return "TaskFinished", {**base, "exit_code": event.exit_code}
    if isinstance(event, TaskFailed):
        return "TaskFailed", {
            **base,
            "reason": event.reason,
            "kind": event.kind.value,
            "exit_code": event.exit_code,
        }
    raise TypeError(f"not a task event: {event!r}")


def usage_sampled(
    identity: NodeIdentity,
    *,
    task_id: str,
    job_id: str,
    attempt: int,
    device_indices: Iterable[int],
    usage: TaskUsage,
    interval_ms: int,
    stamp: Stamp,
) -> Record:
    return {
        **_envelope(identity, task_id, stamp),
        "task_id": task_id,
        "job_id": job_id,
        "node_id": identity.node_id,
        "attempt": attempt,
        "interval_ms": interval_ms,
        "device_indices": list(device_indices),
        "gpu_utilisation_pct": float(min(100.0, max(0.0, usage.gpu_utilisation_pct))),
        "gpu_memory_used_mib": max(0, usage.gpu_memory_used_mib),
        "cpu_milli": max(0, usage.cpu_milli),
        "memory_used_mib": max(0, usage.memory_used_mib),
    }


def link_measured(producer: str, sample: LinkSample, stamp: Stamp) -> Record:
    return {
        **new_envelope(producer, sample.link_id, event_id=stamp.event_id, occurred_at=stamp.at),
        "src_region": sample.src_region,
        "src_site": sample.src_site,
        "dst_region": sample.dst_region,
        "dst_site": sample.dst_site,
        "rtt_ms": sample.rtt_ms,
        "jitter_ms": sample.jitter_ms,
        "loss_ratio": sample.loss_ratio,
        "bandwidth_mbps": sample.bandwidth_mbps,
        "samples": sample.samples,
    }


def replica_load(identity: NodeIdentity, load: ReplicaLoad, event_id: str) -> Record:
    """A hosted replica's ReplicaLoadReported (keyed by its service); the envelope's time is the report's."""
    envelope = new_envelope(
        identity.producer, load.service_id, event_id=event_id, occurred_at=load.reported_at
    )
    return {**envelope, **load_record(load)}
