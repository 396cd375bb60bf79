"""Typed job events <-> the records stored in PostgreSQL and published on Kafka (Avro record bodies).

`body(event)` is the record without its envelope; `parse(name, record)` reads a stored or received record
back (any schema version: the codec has filled in the fields an older writer did not know). The record
forms are those the store has always held, so existing stores replay unchanged; the JobSubmitted record
is the job's specification of record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any

from suanli.scheduling.domain.jobs import (
    AcceptedSpec,
    AcceptedTask,
    Actor,
    Cause,
    DeviceShare,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobRequeued,
    JobSubmitted,
    JobSucceeded,
    PlacedRequests,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskStarted,
    TaskStopRequested,
)
from suanli.scheduling.domain.model import GPU_MILLI

Body = dict[str, Any]
Record = Mapping[str, Any]

# -- JobSubmitted: the accepted spec ------------------------------------------------------------------


def _shared_envs(tasks: tuple[AcceptedTask, ...]) -> tuple[list[dict[str, str]], list[int]]:
    """Each distinct task environment once, and each task's index into them (-1: none).

    Replicas of a task group share one environment; JobSubmitted v4 stores it once for all of them, so
    a 1 KB environment on 1,000 replicas weighs 1 KB in the event, not 1 MB.
    """
    envs: list[dict[str, str]] = []
    index: dict[tuple[tuple[str, str], ...], int] = {}
    refs = []
    for t in tasks:
        if not t.env:
            refs.append(-1)
            continue
        if t.env not in index:
            index[t.env] = len(envs)
            envs.append(dict(t.env))
        refs.append(index[t.env])
    return envs, refs


def spec_record(job_id: str, spec: AcceptedSpec) -> Body:
    """The JobSubmitted body (without the envelope)."""
    envs, refs = _shared_envs(spec.tasks)
    return {
        "job_id": job_id,
        "name": spec.name,
        "tenant": spec.tenant,
        "queue": spec.queue,
        "priority": spec.priority,
        "kind": spec.kind,
        "preemptible": spec.preemptible,
        "min_available": spec.min_available,
        "regions": list(spec.regions),
        "max_runtime_s": None,
        "tasks": [
            {
                "task_id": t.task_id,
                "name": t.name,
                "requests": {
                    "cpu_milli": t.cpu_milli,
                    "memory_mib": t.memory_mib,
                    "gpu_count": t.gpu_count,
                    "gpu_milli": t.gpu_milli if t.gpu_count else GPU_MILLI,
                    "gpu_memory_mib": t.gpu_memory_mib,
                    "gpu_model": t.gpu_models[0] if len(t.gpu_models) == 1 else None,
                    "gpu_models": list(t.gpu_models),
                    "node_selector": dict(t.node_selector),
                    "regions": list(t.regions),
                },
                "image": None,
                "command": list(t.argv),
                "args": [],
                "env": {},
                "env_ref": ref,
                "duration_s": t.duration_s,
            }
            for t, ref in zip(spec.tasks, refs, strict=True)
        ],
        "priority_class": spec.priority_class,
        "best_effort": spec.best_effort,
        "max_retries": spec.max_retries,
        "labels": dict(spec.labels),
        "request_id": spec.request_id,
        "data_region": spec.data_region,
        "max_rtt_ms": spec.max_rtt_ms,
        "locality": spec.locality,
        "min_bandwidth_gbps": spec.min_bandwidth_gbps,
        "envs": envs,
    }


def spec_from_record(record: Record) -> AcceptedSpec:
    """The accepted spec of a JobSubmitted record of any version (v1..v3 copy env into every task)."""
    # One tuple per shared environment, so the replicas that share it in the event share it in memory.
    shared = [tuple(sorted(env.items())) for env in record.get("envs") or ()]
    tasks = []
    for t in record["tasks"]:
        ref = t.get("env_ref", -1)
        own = tuple(sorted((t.get("env") or {}).items()))
        r = t["requests"]
        models = tuple(r.get("gpu_models") or ()) or ((r["gpu_model"],) if r.get("gpu_model") else ())
        gpu_count = int(r.get("gpu_count") or 0)
        tasks.append(
            AcceptedTask(
                task_id=t["task_id"],
                name=t["name"],
                cpu_milli=int(r["cpu_milli"]),
                memory_mib=int(r["memory_mib"]),
                gpu_count=gpu_count,
                gpu_milli=int(r.get("gpu_milli") or GPU_MILLI) if gpu_count else 0,
                gpu_memory_mib=int(r.get("gpu_memory_mib") or 0),
                gpu_models=models,
                node_selector=tuple(sorted((r.get("node_selector") or {}).items())),
                regions=tuple(r.get("regions") or ()) or tuple(record.get("regions") or ()),
                argv=tuple(t.get("command") or ()) + tuple(t.get("args") or ()),
                env=shared[ref] if ref is not None and 0 <= ref < len(shared) else own,
                duration_s=t.get("duration_s"),
            )
        )
    return AcceptedSpec(
        name=record["name"],
        queue=record["queue"],
        tasks=tuple(tasks),
        kind=str(record.get("kind") or "BATCH"),
        priority=int(record["priority"]),
        priority_class=record.get("priority_class") or "",
        preemptible=bool(record.get("preemptible", True)),
        best_effort=bool(record.get("best_effort", False)),
        min_available=int(record["min_available"]),
        max_retries=int(record.get("max_retries") or 0),
        labels=tuple(sorted((record.get("labels") or {}).items())),
        request_id=record.get("request_id") or "",
        regions=tuple(record.get("regions") or ()),
        data_region=record.get("data_region") or "",
        max_rtt_ms=record.get("max_rtt_ms"),
        locality=record.get("locality") or "",
        min_bandwidth_gbps=record.get("min_bandwidth_gbps"),
    )


# -- events with nested or converted values: one function each way -----------------------------------


def _placed(e: TaskPlaced) -> Body:
    r = e.requests
    return {
        "job_id": e.job_id,
        "task_id": e.task_id,
        "node_id": e.node_id,
        "region": e.region,
        "site": e.site,
        "devices": [{"index": d.index, "milli": d.milli} for d in e.devices],
        "requests": {
            "cpu_milli": r.cpu_milli,
            "memory_mib": r.memory_mib,
            "gpu_count": r.gpu_count,
            "gpu_milli": r.gpu_milli,
            "gpu_memory_mib": r.gpu_memory_mib,
            "gpu_model": r.gpu_model,
        },
        "attempt": e.attempt,
        "cycle": e.cycle,
        "command": list(e.command),
        "env": dict(e.env),
        "duration_s": e.duration_s,
        "queue": e.queue,
        "tenant": e.tenant,
        "best_effort": e.best_effort,
        "rtt_ms": e.rtt_ms,
        "price_per_hour": e.price_per_hour,
    }


def _parse_placed(r: Record) -> TaskPlaced:
    q = r["requests"]
    return TaskPlaced(
        job_id=r["job_id"],
        task_id=r["task_id"],
        node_id=r["node_id"],
        region=r.get("region") or "",
        site=r.get("site") or "",
        devices=tuple(DeviceShare(int(d["index"]), int(d["milli"])) for d in r.get("devices") or ()),
        requests=PlacedRequests(
            cpu_milli=int(q["cpu_milli"]),
            memory_mib=int(q["memory_mib"]),
            gpu_count=int(q["gpu_count"]),
            gpu_milli=int(q["gpu_milli"]),
            gpu_memory_mib=int(q.get("gpu_memory_mib") or 0),
            gpu_model=q.get("gpu_model"),
        ),
        attempt=int(r["attempt"]),
        cycle=int(r.get("cycle") or 0),
        command=tuple(r.get("command") or ()),
        env=tuple((r.get("env") or {}).items()),
        duration_s=r.get("duration_s"),
        queue=r.get("queue") or "",
        tenant=r.get("tenant") or "",
        best_effort=bool(r.get("best_effort", False)),
        rtt_ms=r.get("rtt_ms"),
        price_per_hour=r.get("price_per_hour"),
    )


def _started(e: TaskStarted) -> Body:
    return {**_flat(e), "device_indices": list(e.device_indices)}


def _parse_started(r: Record) -> TaskStarted:
    return TaskStarted(
        task_id=r["task_id"],
        job_id=r["job_id"],
        node_id=r["node_id"],
        attempt=int(r["attempt"]),
        device_indices=tuple(int(i) for i in r.get("device_indices") or ()),
        pid=r.get("pid"),
    )


def _requeued(e: JobRequeued) -> Body:
    return {**_flat(e), "cause": e.cause.value}


def _parse_requeued(r: Record) -> JobRequeued:
    event: JobRequeued = _requeued_fields({**r, "cause": Cause(r.get("cause") or Cause.UNKNOWN)})
    return event


# -- flat events: one record field per dataclass field, scalars only ------------------------------------


def _flat(event: Any) -> Body:
    return {f.name: getattr(event, f.name) for f in fields(event)}


def _flat_parser(cls: type[Any]) -> Callable[[Record], Any]:
    """Fields with a default may be missing from the record (a field newer than its writer)."""
    spec = [(f.name, f.default) for f in fields(cls)]

    def parse(record: Record) -> Any:
        return cls(**{n: record[n] if d is MISSING else record.get(n, d) for n, d in spec})

    return parse


_requeued_fields = _flat_parser(JobRequeued)
_FLAT = (TaskFinished, TaskFailed, TaskPreempted, TaskStopRequested, JobSucceeded, JobFailed)

# -- principals (JobSubmitted v5, JobCancelled v2) ----------------------------------------------------


def actor_record(actor: Actor | None) -> Body | None:
    """The `principal` field of a command event (null when the service runs without authentication)."""
    if actor is None:
        return None
    return {"subject": actor.subject, "tenant": actor.tenant, "token_id": actor.token_id}


def actor_from_record(record: Record) -> Actor | None:
    """The principal of a command event; None for older versions and unauthenticated writers."""
    value = record.get("principal")
    return None if not value else Actor(value["subject"], value["tenant"], value["token_id"])


def _cancelled(e: JobCancelled) -> Body:
    return {
        "job_id": e.job_id,
        "reason": e.reason,
        "requested_by": e.requested_by,
        "principal": actor_record(e.by),
    }


def _parse_cancelled(r: Record) -> JobCancelled:
    return JobCancelled(r["job_id"], r.get("reason", ""), r.get("requested_by", ""), actor_from_record(r))


_BODIES: Mapping[type[JobEvent], Callable[[Any], Body]] = {
    JobSubmitted: lambda e: {**spec_record(e.job_id, e.spec), "principal": actor_record(e.submitted_by)},
    JobCancelled: _cancelled,
    TaskPlaced: _placed,
    TaskStarted: _started,
    JobRequeued: _requeued,
    **{t: _flat for t in _FLAT},
}
_PARSERS: Mapping[str, Callable[[Record], JobEvent]] = {
    "JobSubmitted": lambda r: JobSubmitted(r["job_id"], spec_from_record(r), actor_from_record(r)),
    "JobCancelled": _parse_cancelled,
    "TaskPlaced": _parse_placed,
    "TaskStarted": _parse_started,
    "JobRequeued": _parse_requeued,
    **{t.__name__: _flat_parser(t) for t in _FLAT},
}

JOB_EVENTS = frozenset(_PARSERS)
"""Names of the events a job's stream holds."""


def body(event: JobEvent) -> Body:
    """The event's record, without the envelope."""
    return _BODIES[type(event)](event)


def parse(name: str, record: Record) -> JobEvent:
    """The typed event of a stored or received record named `name` (one of `JOB_EVENTS`)."""
    return _PARSERS[name](record)
