"""SubmitJob requests -> the `AcceptedSpec` they ask for, or `InvalidSpec` naming the first bad field by
its path (`spec.tasks[0].resources.gpu_milli: must be 1..1000`). The one conversion from the wire's job
spec (what `suanli.jobspec` sends) to the scheduler's accepted form. Pure: queues and priority classes
are checked by the job commands against the configuration."""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec import limits
from suanli.jobspec.limits import MAX_GPUS_PER_TASK, MAX_RETRIES, MAX_TASKS
from suanli.resources import DeviceCatalogue
from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask
from suanli.scheduling.domain.model import GPU_MILLI
from suanli.scheduling.service_layer.errors import InvalidSpec

LOCALITY_NAMES = {
    pb.LOCALITY_UNSPECIFIED: "",
    pb.LOCALITY_ZONE: "zone",
    pb.LOCALITY_REGION: "region",
    pb.LOCALITY_ANY: "any",
    pb.LOCALITY_NODE: "node",
    pb.LOCALITY_FABRIC: "fabric",
}
KIND_NAMES = {
    pb.JOB_KIND_UNSPECIFIED: "BATCH",
    pb.JOB_KIND_BATCH: "BATCH",
    pb.JOB_KIND_TRAINING: "TRAINING",
    pb.JOB_KIND_INFERENCE: "INFERENCE",
}


def _check(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise InvalidSpec(field, message)


def _limit(problem: str | None, field: str) -> None:
    """A kernel limits rule (`suanli.jobspec.limits`) as this request's error."""
    if problem is not None:
        raise InvalidSpec(field, problem)


def validate_submit(request: pb.SubmitJobRequest) -> AcceptedSpec:
    size = request.ByteSize()
    _check(
        size <= limits.MAX_REQUEST_BYTES,
        "request",
        f"at most {limits.MAX_REQUEST_BYTES} bytes encoded (got {size})",
    )
    _check(
        len(request.request_id) <= limits.MAX_REQUEST_ID,
        "request_id",
        f"must be at most {limits.MAX_REQUEST_ID} characters",
    )
    _check(request.HasField("spec"), "spec", "is required")
    s = request.spec
    _check(bool(s.queue), "spec.queue", "is required")
    _limit(limits.queue_problem(s.queue), "spec.queue")
    if s.name:
        _limit(limits.name_problem(s.name), "spec.name")
    _check(s.kind in KIND_NAMES, "spec.kind", f"unknown kind {s.kind}")
    _check(len(s.tasks) > 0, "spec.tasks", "at least one task is required")
    _check(
        len(s.tasks) <= limits.MAX_TASK_GROUPS,
        "spec.tasks",
        f"at most {limits.MAX_TASK_GROUPS} task groups (got {len(s.tasks)})",
    )
    # Before expanding replicas: a request for a billion replicas is refused without building them.
    _limit(limits.tasks_problem((max(t.replicas, 1), t.env) for t in s.tasks), "spec.tasks")
    tasks: list[AcceptedTask] = []
    for i, t in enumerate(s.tasks):
        tasks.extend(_tasks(t, f"spec.tasks[{i}]", i))
    names = [t.name for t in tasks]
    for i, name in enumerate(names):
        _check(names.index(name) == i, "spec.tasks", f"task name {name!r} is used twice")
    _check(
        0 <= s.min_available <= len(tasks),
        "spec.min_available",
        f"must be 0..{len(tasks)} (the number of tasks); 0 means all",
    )
    _check(0 <= s.max_retries <= MAX_RETRIES, "spec.max_retries", f"must be 0..{MAX_RETRIES}")
    _limit(limits.labels_problem(s.labels), "spec.labels")
    preemptible = s.preemptible if s.HasField("preemptible") else True
    _check(
        not (s.best_effort and not preemptible), "spec.preemptible", "best-effort jobs are always preemptible"
    )
    gang = s.min_available or len(tasks)
    max_rtt, locality, bandwidth = _network(s, gang)
    return AcceptedSpec(
        name=s.name or "job",
        queue=s.queue,
        tasks=tuple(tasks),
        kind=KIND_NAMES[s.kind],
        priority_class=s.priority_class,
        preemptible=preemptible,
        best_effort=s.best_effort,
        min_available=s.min_available or len(tasks),
        max_retries=s.max_retries,
        labels=tuple(sorted(s.labels.items())),
        request_id=request.request_id,
        data_region=s.data_region,
        max_rtt_ms=max_rtt,
        locality=locality,
        min_bandwidth_gbps=bandwidth,
    )


def _network(s: pb.JobSpec, gang: int) -> tuple[float | None, str, float | None]:
    """The network-aware placement fields: the RTT bound, the locality and the bandwidth floor."""
    _limit(limits.region_problem(s.data_region), "spec.data_region")
    max_rtt = s.max_rtt_ms if s.HasField("max_rtt_ms") else None
    if max_rtt is not None:
        _check(math.isfinite(max_rtt) and max_rtt >= 0, "spec.max_rtt_ms", "must be a finite number >= 0")
        _check(bool(s.data_region), "spec.max_rtt_ms", "needs spec.data_region (the RTT is measured to it)")
    _check(s.locality in LOCALITY_NAMES, "spec.locality", f"unknown locality {s.locality}")
    locality = LOCALITY_NAMES[s.locality]
    _check(
        not locality or gang >= 2,
        "spec.locality",
        f"applies only to a gang (2 or more tasks placed together); this job places {gang} together",
    )
    bandwidth = s.min_bandwidth_gbps if s.HasField("min_bandwidth_gbps") else None
    if bandwidth is not None:
        _check(
            math.isfinite(bandwidth) and bandwidth > 0,
            "spec.min_bandwidth_gbps",
            "must be a finite number > 0",
        )
        _check(locality == "any", "spec.min_bandwidth_gbps", "only with locality any")
    return max_rtt, locality, bandwidth


def _tasks(t: Any, path: str, position: int) -> list[AcceptedTask]:
    r = t.resources
    rp = f"{path}.resources"
    _check(r.cpu_milli >= 0, f"{rp}.cpu_milli", "must be >= 0")
    _check(r.memory_mib >= 0, f"{rp}.memory_mib", "must be >= 0")
    _check(0 <= r.gpu_count <= MAX_GPUS_PER_TASK, f"{rp}.gpu_count", f"must be 0..{MAX_GPUS_PER_TASK}")
    _check(r.gpu_memory_mib >= 0, f"{rp}.gpu_memory_mib", "must be >= 0")
    gpu_milli = r.gpu_milli
    if r.gpu_count == 0:
        _check(gpu_milli == 0, f"{rp}.gpu_milli", "must be 0 when gpu_count is 0")
    else:
        gpu_milli = gpu_milli or GPU_MILLI  # unset means whole devices
        _check(1 <= gpu_milli <= GPU_MILLI, f"{rp}.gpu_milli", f"must be 1..{GPU_MILLI}")
        _check(
            r.gpu_count == 1 or gpu_milli == GPU_MILLI,
            f"{rp}.gpu_milli",
            f"a fractional share (below {GPU_MILLI}) needs gpu_count 1",
        )
    for j, model in enumerate(r.gpu_models):
        _check(bool(model.strip()), f"{rp}.gpu_models[{j}]", "must be non-empty")
    for j, region in enumerate(r.regions):
        _check(bool(region.strip()), f"{rp}.regions[{j}]", "must be non-empty")
    _limit(limits.labels_problem(r.node_selector), f"{rp}.node_selector")
    _check(
        math.isfinite(t.duration_s) and t.duration_s >= 0,
        f"{path}.duration_s",
        "must be a finite number >= 0",
    )
    _check(0 <= t.replicas <= MAX_TASKS, f"{path}.replicas", f"must be 0..{MAX_TASKS} (0 means 1)")
    _limit(limits.env_problem(t.env), f"{path}.env")
    _limit(limits.command_problem([t.command, *t.args]), f"{path}.command")
    try:
        argv = tuple(shlex.split(t.command)) + tuple(t.args)
    except ValueError as exc:
        raise InvalidSpec(f"{path}.command", f"cannot be split into words: {exc}") from None
    name = t.name or f"task{position}"
    _limit(limits.name_problem(name), f"{path}.name")
    base = AcceptedTask(
        task_id="",
        name=name,
        cpu_milli=r.cpu_milli,
        memory_mib=r.memory_mib,
        gpu_count=r.gpu_count,
        gpu_milli=gpu_milli if r.gpu_count else 0,
        gpu_memory_mib=r.gpu_memory_mib,
        gpu_models=tuple(m.strip() for m in r.gpu_models),
        node_selector=tuple(sorted(r.node_selector.items())),
        regions=tuple(r.regions),
        argv=argv,
        env=tuple(sorted(t.env.items())),
        duration_s=t.duration_s if t.duration_s > 0 else None,
    )
    replicas = t.replicas or 1
    if replicas == 1:
        return [base]
    return [replace(base, name=f"{name}-{k}") for k in range(replicas)]


def check_gpu_models(
    spec: pb.JobSpec, catalogue: DeviceCatalogue, fleet_models: Callable[[], Collection[str]]
) -> None:
    """Every GPU model a task names exists: a model of the device catalogue, or one that a node of the
    fleet reports (a device the catalogue does not list yet). Names are compared exactly, as placement and
    quota compare them, so a spelling the catalogue only knows as an alias is refused with its model name:
    accepted, it would wait forever for a node reporting that spelling. `fleet_models` is only asked when
    a name is not in the catalogue."""
    models = frozenset(catalogue.models)
    reported: Collection[str] | None = None
    for i, task in enumerate(spec.tasks):
        for j, name in enumerate(task.resources.gpu_models):
            model = name.strip()
            if model in models:
                continue
            if reported is None:
                reported = fleet_models()
            if model not in reported:
                raise InvalidSpec(
                    f"spec.tasks[{i}].resources.gpu_models[{j}]", _unknown_model(model, catalogue, reported)
                )


def _unknown_model(model: str, catalogue: DeviceCatalogue, reported: Collection[str]) -> str:
    found = catalogue.lookup(model)
    hint = f" (did you mean {found.model!r}?)" if found.known else ""
    extra = sorted(set(reported) - set(catalogue.models))
    return f"unknown GPU model {model!r}{hint}; known models: {', '.join((*catalogue.models, *extra))}"
