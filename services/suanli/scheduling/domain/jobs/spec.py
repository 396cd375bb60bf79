"""What the scheduler accepted a job to be: the validated, expanded form of a user's job spec.

The user-facing spec is `suanli.jobspec.JobSpec` (YAML, human units, task groups with replicas). The
scheduler keeps something else: every replica expanded into its own task with its own id, the gang size
resolved to a number, the priority resolved from the priority class, all in canonical units. That is
what the JobSubmitted event records and what a rebuilt scheduler reads back, so it is a type of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from suanli.scheduling.domain.model import Job, JobKind, Locality, Task, TaskRequest

KINDS = {"BATCH": JobKind.BATCH, "TRAINING": JobKind.TRAINING, "INFERENCE": JobKind.INFERENCE}
SIM_DURATION_ENV = "SUANLI_SIM_DURATION_S"


@dataclass(frozen=True, slots=True)
class AcceptedTask:
    """One task of an accepted job (one replica of a task group)."""

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

    def request(self, data_region: str = "", max_rtt_ms: float | None = None) -> TaskRequest:
        """What this task asks of a node; the job's network constraint rides along when given."""
        return TaskRequest(
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            gpu_count=self.gpu_count,
            gpu_milli=self.gpu_milli,
            gpu_models=self.gpu_models,
            node_selector=self.node_selector,
            regions=self.regions,
            data_region=data_region,
            max_rtt_ms=max_rtt_ms,
        )


@dataclass(frozen=True, slots=True)
class AcceptedSpec:
    name: str
    queue: str
    tasks: tuple[AcceptedTask, ...]
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
    # Network-aware placement (docs/jobspec.md): where the data is, the RTT bound to it, how close
    # together a gang runs ("" is the default: one region for a gang) and, with "any", the bandwidth floor.
    data_region: str = ""
    max_rtt_ms: float | None = None
    locality: str = ""
    min_bandwidth_gbps: float | None = None

    @property
    def tenant(self) -> str:
        return self.queue.split("/", 1)[0]

    def domain_job(self, job_id: str, task_ids: tuple[str, ...] | None = None) -> Job:
        """The queueing core's view; `task_ids` limits it to those tasks (the ones still to place)."""
        tasks = tuple(
            Task(t.task_id, t.request(self.data_region, self.max_rtt_ms))
            for t in self.tasks
            if task_ids is None or t.task_id in task_ids
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
            locality=Locality(self.locality) if self.locality else None,
            min_bandwidth_gbps=self.min_bandwidth_gbps,
        )

    def same_request(self, other: AcceptedSpec) -> bool:
        """Equal apart from generated task ids: what an idempotent retry must match."""
        return _request_key(self) == _request_key(other)


def _request_key(spec: AcceptedSpec) -> tuple[Any, ...]:
    return (
        spec.name,
        spec.queue,
        spec.kind,
        spec.priority_class,
        spec.preemptible,
        spec.best_effort,
        spec.min_available,
        spec.max_retries,
        spec.labels,
        spec.data_region,
        spec.max_rtt_ms,
        spec.locality,
        spec.min_bandwidth_gbps,
        tuple((t.name, *_task_body(t)) for t in spec.tasks),
    )


def _task_body(t: AcceptedTask) -> tuple[Any, ...]:
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


def task_env(task: AcceptedTask) -> dict[str, str]:
    """The environment sent with a placement; the simulated duration rides along for today's agents."""
    env = dict(task.env)
    if task.duration_s is not None:
        env.setdefault(SIM_DURATION_ENV, repr(float(task.duration_s)))
    return env
