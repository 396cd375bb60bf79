"""Records for tests and benchmarks: probe rounds, capacity views, region link states and load reports."""

from __future__ import annotations

import uuid
from typing import Any

from suanli.clock import from_ms
from suanli.contracts import new_envelope
from suanli.routing.domain.links import REGION, LinkState, LinkStatus


def link_measured(
    src: tuple[str, str],
    dst: tuple[str, str],
    at_ms: int,
    *,
    rtt_ms: float = 30.0,
    jitter_ms: float = 1.0,
    loss_ratio: float = 0.0,
    bandwidth_mbps: float | None = None,
    samples: int = 5,
) -> dict[str, Any]:
    """A probe round from ``src`` to ``dst``, each given as (region, site)."""
    return {
        **new_envelope(f"sensing/{src[1]}", src[1], event_id=str(uuid.uuid4()), occurred_at=from_ms(at_ms)),
        "src_region": src[0],
        "src_site": src[1],
        "dst_region": dst[0],
        "dst_site": dst[1],
        "rtt_ms": rtt_ms,
        "jitter_ms": jitter_ms,
        "loss_ratio": loss_ratio,
        "bandwidth_mbps": bandwidth_mbps,
        "samples": samples,
    }


def node_capacity(
    node_id: str,
    region: str,
    site: str,
    at_ms: int,
    *,
    model: str = "NVIDIA H100 80GB HBM3",
    device_class: str = "h100-80gb-sxm",
    gpus: int = 8,
    cu_per_gpu: float = 989.0,
    used_gpus: int = 0,
) -> dict[str, Any]:
    """A node's capacity view as metering publishes it; ``used_gpus`` of its GPUs are allocated."""
    res = {"cpu_milli": 128_000, "memory_mib": 1_048_576, "gpu_count": gpus, "gpu_milli": gpus * 1000}
    res["gpu_memory_mib"] = gpus * 81_920
    used = {"cpu_milli": 0, "memory_mib": 0, "gpu_count": used_gpus, "gpu_milli": used_gpus * 1000}
    used["gpu_memory_mib"] = used_gpus * 81_920
    return {
        **new_envelope("metering", node_id, event_id=str(uuid.uuid4()), occurred_at=from_ms(at_ms)),
        "node_id": node_id,
        "region": region,
        "zone": f"{site}-z1",
        "site": site,
        "total": res,
        "allocatable": res,
        "used": used,
        "cu_total": gpus * cu_per_gpu,
        "cu_allocatable": gpus * cu_per_gpu,
        "cu_used": used_gpus * cu_per_gpu,
        "devices": [
            {
                "index": i,
                "uuid": f"GPU-{node_id}-{i}",
                "model": model,
                "device_class": device_class,
                "cu": cu_per_gpu,
                "memory_total_mib": 81_920,
                "memory_free_mib": 81_920,
                "milli_free": 0 if i < used_gpus else 1000,
                "healthy": True,
            }
            for i in range(gpus)
        ],
    }


def region_link(src: str, dst: str, rtt_ms: float, status: LinkStatus = LinkStatus.OK) -> LinkState:
    """A region pair's summary as the network view holds it (`link_record` makes it a record)."""
    return LinkState(
        link_id=f"region:{src}->{dst}",
        scope=REGION,
        src_region=src,
        src_site="",
        dst_region=dst,
        dst_site="",
        rtt_ms=rtt_ms,
        baseline_rtt_ms=rtt_ms,
        jitters=(1.0,),
        loss_ratio=0.0,
        bandwidth_mbps=None,
        last_probe_ms=0,
        status=status,
        reason="",
        rounds=1,
    )


def replica_load(
    service_id: str,
    replica_id: str,
    region: str,
    at_ms: int,
    *,
    address: str = "",
    in_flight: int = 0,
    queued: int = 0,
    interval_s: float = 60.0,
) -> dict[str, Any]:
    """A `ReplicaLoadReported` of a replica batching up to 8 requests, reported at ``at_ms``."""
    return {
        **new_envelope("test", service_id, event_id=str(uuid.uuid4()), occurred_at=from_ms(at_ms)),
        "service_id": service_id,
        "replica_id": replica_id,
        "region": region,
        "address": address,
        "in_flight": in_flight,
        "queued": queued,
        "max_batch": 8,
        "prefill_tokens_per_s": 10_000.0,
        "decode_step_s": 0.02,
        "recent_latency_s": 2.0,
        "prefill_backlog_s": 0.0,
        "kv_free_tokens": 100_000,
        "interval_s": interval_s,
    }
