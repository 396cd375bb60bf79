"""Terse builders for tests of the queueing core (and of placers plugged into it)."""

from __future__ import annotations

from suanli.scheduling.domain.model import GPU_MILLI, GpuDevice, Job, Node, Task, TaskPlacement, TaskRequest
from suanli.scheduling.domain.queueing.queues import QueueSpec, ResourceQuota
from suanli.scheduling.domain.queueing.state import RunningWorkload, Workload


def node(node_id: str, gpus: int = 0, model: str = "A100", cpu: int = 64_000, memory: int = 256_000) -> Node:
    devices = tuple(GpuDevice(index=i, model=model) for i in range(gpus))
    return Node(id=node_id, cpu_milli=cpu, memory_mib=memory, gpus=devices)


def job(
    job_id: str,
    queue: str = "q",
    *,
    tasks: int = 1,
    gpus: int = 1,
    milli: int = GPU_MILLI,
    cpu: int = 1_000,
    memory: int = 1_024,
    models: tuple[str, ...] = (),
    priority: int = 0,
    min_available: int | None = None,
    preemptible: bool = True,
    best_effort: bool = False,
) -> Job:
    request = TaskRequest(
        cpu_milli=cpu, memory_mib=memory, gpu_count=gpus, gpu_milli=milli if gpus else 0, gpu_models=models
    )
    return Job(
        id=job_id,
        queue=queue,
        tasks=tuple(Task(f"{job_id}-{i}", request) for i in range(tasks)),
        priority=priority,
        min_available=min_available,
        preemptible=preemptible,
        best_effort=best_effort,
    )


def queue(
    name: str,
    cohort: str | None = None,
    *,
    stopped: bool = False,
    **quotas: int | tuple[int, int | None, int | None, int | None],
) -> QueueSpec:
    """`queue("a", gpu_A100=4000, cpu=(8000, 16000, None, None))`: a bare int is the guarantee; a tuple is
    (guaranteed, maximum, borrowing_limit, lending_limit). `gpu_X` names the flavour `gpu:X`."""
    specs = []
    for key, value in quotas.items():
        resource = f"gpu:{key[4:]}" if key.startswith("gpu_") else key
        numbers = (value, None, None, None) if isinstance(value, int) else value
        specs.append(ResourceQuota(resource, *numbers))
    return QueueSpec(name=name, quotas=tuple(specs), cohort=cohort, stopped=stopped)


def pending(the_job: Job, seq: int, priority_class: str | None = None) -> Workload:
    return Workload(the_job, seq, priority_class)


def running(the_job: Job, seq: int, *where: tuple[str, tuple[int, ...]]) -> RunningWorkload:
    """`running(j, 1, ("n1", (0, 1)), ("n2", (0,)))`: task i of the job on where[i]."""
    placements = tuple(
        TaskPlacement(
            task.id,
            node_id,
            indices,
            tuple(task.request.gpu_milli for _ in indices),
        )
        for task, (node_id, indices) in zip(the_job.tasks, where, strict=True)
    )
    return RunningWorkload(Workload(the_job, seq), placements)
