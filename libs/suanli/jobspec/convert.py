"""The spec model to the wire's `scheduler_pb2.JobSpec` and back.

Going back goes through the YAML document form (human units), so a spec read from the scheduler is
validated by the same rules as one read from a file, and `to_document` has a single spelling of each value.
"""

from __future__ import annotations

from typing import Any

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec.model import GPU_MILLI, JobSpec, Resources, TaskSpec
from suanli.jobspec.units import format_cpu, format_duration, format_memory

_KINDS: dict[str, int] = {
    "training": pb.JOB_KIND_TRAINING,
    "inference": pb.JOB_KIND_INFERENCE,
    "batch": pb.JOB_KIND_BATCH,
}
_KIND_NAMES: dict[int, str] = {number: name for name, number in _KINDS.items()}
_LOCALITIES: dict[str, int] = {
    "zone": pb.LOCALITY_ZONE,
    "region": pb.LOCALITY_REGION,
    "any": pb.LOCALITY_ANY,
    "node": pb.LOCALITY_NODE,
    "fabric": pb.LOCALITY_FABRIC,
}
_LOCALITY_NAMES: dict[int, str] = {number: name for name, number in _LOCALITIES.items()}


def locality_name(locality: int) -> str | None:
    """A wire Locality as the spec spells it; unspecified (or unknown) reads as None, the default."""
    return _LOCALITY_NAMES.get(locality)


def kind_name(kind: int) -> str:
    """A wire JobKind as the spec spells it; unspecified reads as the spec's default, batch."""
    return _KIND_NAMES.get(kind, "batch")


def _resources_to_proto(resources: Resources) -> pb.ResourceRequest:
    return pb.ResourceRequest(
        cpu_milli=resources.cpu_milli,
        memory_mib=resources.memory_mib,
        gpu_count=resources.gpu_count,
        gpu_milli=resources.gpu_milli,
        gpu_memory_mib=resources.gpu_memory_mib,
        gpu_models=resources.gpu_models,
        node_selector=resources.node_selector,
        regions=resources.regions,
    )


def _task_to_proto(task: TaskSpec) -> pb.TaskSpec:
    return pb.TaskSpec(
        name=task.name,
        replicas=task.replicas,
        resources=_resources_to_proto(task.resources),
        command=task.command,
        args=task.args,
        env=task.env,
        duration_s=task.duration_s,
    )


def to_proto(spec: JobSpec) -> pb.JobSpec:
    """The wire form of a validated spec."""
    return pb.JobSpec(
        name=spec.name,
        queue=spec.queue,
        kind=_KINDS[spec.kind],  # type: ignore[arg-type]
        priority_class=spec.priority_class,
        preemptible=spec.preemptible,
        best_effort=spec.best_effort,
        min_available=spec.min_available,
        max_retries=spec.max_retries,
        labels=spec.labels,
        tasks=[_task_to_proto(t) for t in spec.tasks],
        data_region=spec.data_region,
        max_rtt_ms=spec.max_rtt_ms,
        locality=_LOCALITIES[spec.locality] if spec.locality else pb.LOCALITY_UNSPECIFIED,  # type: ignore[arg-type]
        min_bandwidth_gbps=spec.min_bandwidth_gbps,
    )


def _gpu_document(request: pb.ResourceRequest) -> Any:
    if request.gpu_count == 0:
        return None
    milli = request.gpu_milli or GPU_MILLI
    if not request.gpu_memory_mib:
        return request.gpu_count if milli == GPU_MILLI else milli / GPU_MILLI
    return _drop_empty(
        {
            "count": request.gpu_count,
            "milli": milli if milli != GPU_MILLI else None,
            "memory": format_memory(request.gpu_memory_mib),
        }
    )


def _drop_empty(document: dict[str, Any]) -> dict[str, Any]:
    """Leave out unset values, so a printed spec reads like a hand-written one."""
    return {k: v for k, v in document.items() if v not in (None, "", [], {})}


def _resources_document(request: pb.ResourceRequest) -> dict[str, Any]:
    return _drop_empty(
        {
            "cpu": format_cpu(request.cpu_milli) if request.cpu_milli else None,
            "memory": format_memory(request.memory_mib) if request.memory_mib else None,
            "gpu": _gpu_document(request),
            "gpu_models": list(request.gpu_models),
            "node_selector": dict(request.node_selector),
            "regions": list(request.regions),
        }
    )


def _task_document(task: pb.TaskSpec) -> dict[str, Any]:
    return _drop_empty(
        {
            "name": task.name,
            "replicas": task.replicas or 1,
            "resources": _resources_document(task.resources),
            "command": task.command,
            "args": list(task.args),
            "env": dict(task.env),
            "duration": format_duration(task.duration_s) if task.duration_s else None,
        }
    )


def document_from_proto(spec: pb.JobSpec) -> dict[str, Any]:
    """The YAML form of a wire spec; `min_available` 0 and other defaults are left out."""
    document = _drop_empty(
        {
            "name": spec.name,
            "queue": spec.queue,
            "kind": kind_name(spec.kind),
            "priority_class": spec.priority_class,
            "best_effort": spec.best_effort or None,
            "max_retries": spec.max_retries or None,
            "labels": dict(spec.labels),
            "tasks": [_task_document(t) for t in spec.tasks],
            "min_available": spec.min_available or None,
            "data_region": spec.data_region,
            "max_rtt_ms": spec.max_rtt_ms if spec.HasField("max_rtt_ms") else None,
            "locality": locality_name(spec.locality),
            "min_bandwidth_gbps": spec.min_bandwidth_gbps if spec.HasField("min_bandwidth_gbps") else None,
        }
    )
    # Unset on the wire means true, as in the spec.
    document["preemptible"] = spec.preemptible if spec.HasField("preemptible") else True
    return document


def from_proto(spec: pb.JobSpec) -> JobSpec:
    """A wire spec read back through the same validation as a file (`JobSpecError` when invalid)."""
    return JobSpec.model_validate(document_from_proto(spec))


def to_document(spec: JobSpec) -> dict[str, Any]:
    """The YAML form of a spec in human units, unset values left out."""
    return document_from_proto(to_proto(spec))
