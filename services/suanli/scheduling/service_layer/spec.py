"""What a job asks for, as the service keeps it: validated values, and their JobSubmitted record form.

The JobSubmitted event is the job's specification of record; `spec_from_record` reads it back (any schema
version, upgraded by the codec) and `spec_record` writes it, so a rebuilt service sees exactly what was
accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from suanli.scheduling.domain.model import GPU_MILLI, Job, JobKind, Task, TaskRequest

KINDS = {"BATCH": JobKind.BATCH, "TRAINING": JobKind.TRAINING, "INFERENCE": JobKind.INFERENCE}
SIM_DURATION_ENV = "SUANLI_SIM_DURATION_S"


@dataclass(frozen=True, slots=True)
class TaskSpec:
    task_id: str
    name: str
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_count: int = 0
    gpu_milli: int = 0
    gpu_memory_mib: int = 0
    gpu_models: tuple[str, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    regions: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    duration_s: float | None = None

    def request(self) -> TaskRequest:
        return TaskRequest(
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            gpu_count=self.gpu_count,
            gpu_milli=self.gpu_milli,
            gpu_models=self.gpu_models,
            node_selector=self.node_selector,
            regions=self.regions,
        )


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    queue: str
    tasks: tuple[TaskSpec, ...]
    kind: str = "BATCH"
    priority: int = 0
    priority_class: str = ""
    preemptible: bool = True
    best_effort: bool = False
    min_available: int = 0  # resolved gang size: 1..len(tasks)
    max_retries: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    request_id: str = ""
    regions: tuple[str, ...] = field(default=())

    @property
    def tenant(self) -> str:
        return self.queue.split("/", 1)[0]

    def domain_job(self, job_id: str, task_ids: tuple[str, ...] | None = None) -> Job:
        """The queueing core's view; `task_ids` limits it to those tasks (the ones still to place)."""
        tasks = tuple(
            Task(t.task_id, t.request()) for t in self.tasks if task_ids is None or t.task_id in task_ids
        )
        return Job(
            id=job_id,
            queue=self.queue,
            tasks=tasks,
            priority=self.priority,
            min_available=min(self.min_available, len(tasks)) if self.min_available else None,
            preemptible=self.preemptible,
            kind=KINDS.get(self.kind, JobKind.BATCH),
            best_effort=self.best_effort,
        )

    def same_request(self, other: JobSpec) -> bool:
        """Equal apart from generated task ids: what an idempotent retry must match."""
        strip = lambda s: tuple((t.name, *_task_body(t)) for t in s.tasks)  # noqa: E731
        return (
            self.name,
            self.queue,
            self.kind,
            self.priority_class,
            self.preemptible,
            self.best_effort,
            self.min_available,
            self.max_retries,
            self.labels,
            strip(self),
        ) == (
            other.name,
            other.queue,
            other.kind,
            other.priority_class,
            other.preemptible,
            other.best_effort,
            other.min_available,
            other.max_retries,
            other.labels,
            strip(other),
        )


def _task_body(t: TaskSpec) -> tuple[Any, ...]:
    return (
        t.cpu_milli,
        t.memory_mib,
        t.gpu_count,
        t.gpu_milli,
        t.gpu_memory_mib,
        t.gpu_models,
        t.node_selector,
        t.regions,
        t.argv,
        t.env,
        t.duration_s,
    )


def spec_record(job_id: str, spec: JobSpec) -> dict[str, Any]:
    """The JobSubmitted body (without the envelope)."""
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
                "env": dict(t.env),
                "duration_s": t.duration_s,
            }
            for t in spec.tasks
        ],
        "priority_class": spec.priority_class,
        "best_effort": spec.best_effort,
        "max_retries": spec.max_retries,
        "labels": dict(spec.labels),
        "request_id": spec.request_id,
    }


def spec_from_record(record: Mapping[str, Any]) -> JobSpec:
    tasks = []
    for t in record["tasks"]:
        r = t["requests"]
        models = tuple(r.get("gpu_models") or ()) or ((r["gpu_model"],) if r.get("gpu_model") else ())
        gpu_count = int(r.get("gpu_count") or 0)
        tasks.append(
            TaskSpec(
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
                env=tuple(sorted((t.get("env") or {}).items())),
                duration_s=t.get("duration_s"),
            )
        )
    return JobSpec(
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
    )


def task_env(task: TaskSpec) -> dict[str, str]:
    """The environment sent with a placement; the simulated duration rides along for today's agents."""
    env = dict(task.env)
    if task.duration_s is not None:
        env.setdefault(SIM_DURATION_ENV, repr(float(task.duration_s)))
    return env
