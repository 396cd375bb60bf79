"""Builders of the input events metering consumes, as contract-shaped records (tests and demos).

Every builder derives its event id from its content, so building the same event twice gives a true
duplicate, which is what the de-duplication tests need.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from suanli.clock import from_ms
from suanli.contracts import new_envelope
from suanli.metering.domain.ids import derived_id


def ms(iso: str) -> int:
    """'2025-01-01T10:00:30' (UTC) -> epoch milliseconds."""
    at = dt.datetime.fromisoformat(iso).replace(tzinfo=dt.UTC)
    return int(at.timestamp() * 1000)


def _envelope(producer: str, subject: str, at_ms: int, *id_parts: object) -> dict[str, Any]:
    return new_envelope(producer, subject, event_id=derived_id("test", *id_parts), occurred_at=from_ms(at_ms))


def gpu(
    index: int, model: str = "NVIDIA H200", memory_mib: int = 143_771, used_mib: int = 0
) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": f"GPU-{index:04d}",
        "model": model,
        "memory_total_mib": memory_mib,
        "memory_used_mib": used_mib,
        "utilisation_pct": 0.0,
        "temperature_c": 40.0,
        "power_w": None,
        "mig_instances": None,
    }


def node_snapshot(
    node_id: str,
    at_ms: int,
    *,
    sequence: int,
    region: str = "cn-north",
    devices: Sequence[dict[str, Any]] = (),
    cpu_cores: int = 64,
    memory_mib: int = 512 * 1024,
    task_ids: Sequence[str] = (),
    interval_ms: int = 5_000,
) -> dict[str, Any]:
    return {
        **_envelope(f"sensing/{node_id}", node_id, at_ms, "snapshot", node_id, sequence, at_ms),
        "node_id": node_id,
        "region": region,
        "zone": f"{region}-a",
        "site": f"{region}-dc1",
        "sequence": sequence,
        "report_interval_ms": interval_ms,
        "host": {
            "cpu_cores": cpu_cores,
            "cpu_utilisation_pct": 10.0,
            "memory_total_mib": memory_mib,
            "memory_used_mib": memory_mib // 4,
        },
        "devices": list(devices),
        "task_ids": list(task_ids),
    }


def task_placed(
    task_id: str,
    node_id: str,
    at_ms: int,
    *,
    job_id: str = "job-1",
    devices: Sequence[tuple[int, int]] = ((0, 1000),),
    cpu_milli: int = 4000,
    attempt: int = 1,
    tenant: str = "acme",
    queue: str = "research",
) -> dict[str, Any]:
    milli = devices[0][1] if devices else 1000
    return {
        **_envelope("scheduling", node_id, at_ms, "placed", task_id, attempt),
        "job_id": job_id,
        "task_id": task_id,
        "node_id": node_id,
        "region": "cn-north",
        "site": "cn-north-dc1",
        "devices": [{"index": i, "milli": m} for i, m in devices],
        "requests": {
            "cpu_milli": cpu_milli,
            "memory_mib": 16_384,
            "gpu_count": len(devices),
            "gpu_milli": milli,
            "gpu_memory_mib": 0,
            "gpu_model": None,
        },
        "attempt": attempt,
        "cycle": 1,
        "command": None,
        "env": None,
        "tenant": tenant,
        "queue": queue,
    }


def task_started(
    task_id: str, node_id: str, at_ms: int, *, job_id: str = "job-1", attempt: int = 1
) -> dict[str, Any]:
    return {
        **_envelope(f"sensing/{node_id}", task_id, at_ms, "started", task_id, attempt),
        "task_id": task_id,
        "job_id": job_id,
        "node_id": node_id,
        "attempt": attempt,
        "device_indices": [],
        "pid": None,
    }


def task_finished(
    task_id: str, node_id: str, at_ms: int, *, job_id: str = "job-1", attempt: int = 1
) -> dict[str, Any]:
    return {
        **_envelope(f"sensing/{node_id}", task_id, at_ms, "finished", task_id, attempt),
        "task_id": task_id,
        "job_id": job_id,
        "node_id": node_id,
        "attempt": attempt,
        "exit_code": 0,
    }


def task_preempted(
    task_id: str, node_id: str, at_ms: int, *, job_id: str = "job-1", attempt: int = 1
) -> dict[str, Any]:
    return {
        **_envelope("scheduling", node_id, at_ms, "preempted", task_id, attempt),
        "job_id": job_id,
        "task_id": task_id,
        "node_id": node_id,
        "attempt": attempt,
        "reason": "make room",
        "preemptor_job_id": "job-urgent",
    }


def job_submitted(
    job_id: str, task_ids: Sequence[str], at_ms: int, *, tenant: str = "acme", queue: str = "research"
) -> dict[str, Any]:
    return {
        **_envelope("scheduling", job_id, at_ms, "job", job_id),
        "job_id": job_id,
        "name": job_id,
        "tenant": tenant,
        "queue": queue,
        "priority": 0,
        "kind": "TRAINING",
        "preemptible": True,
        "min_available": 1,
        "regions": [],
        "max_runtime_s": None,
        "tasks": [
            {
                "task_id": t,
                "name": t,
                "requests": {
                    "cpu_milli": 4000,
                    "memory_mib": 16_384,
                    "gpu_count": 1,
                    "gpu_milli": 1000,
                    "gpu_memory_mib": 0,
                    "gpu_model": None,
                },
                "image": None,
                "command": [],
                "args": [],
                "env": {},
            }
            for t in task_ids
        ],
    }
