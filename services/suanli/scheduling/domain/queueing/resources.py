"""Resource flavours and the arithmetic on amounts of them.

A flavour is the unit quota is written in: `cpu` (milli-CPU), `memory` (MiB) and one flavour per GPU
model, `gpu:<model>` (milli-GPU). GPUs are split by model because an A100 hour and a T4 hour are not
interchangeable, so a queue is promised each model separately.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from suanli.scheduling.domain.model import Job, Node, TaskPlacement, TaskRequest

CPU = "cpu"
MEMORY = "memory"
_GPU_PREFIX = "gpu:"

Amounts = dict[str, int]


def gpu_flavour(model: str) -> str:
    return f"{_GPU_PREFIX}{model}"


def gpu_model_of(flavour: str) -> str | None:
    return flavour[len(_GPU_PREFIX) :] if flavour.startswith(_GPU_PREFIX) else None


def flavour_order(flavour: str) -> tuple[int, str]:
    """GPU flavours first: they are the scarce resource, so a GPU shortfall is the most useful to report."""
    return (0 if gpu_model_of(flavour) is not None else 1, flavour)


def add_into(target: Amounts, delta: Mapping[str, int], sign: int = 1) -> None:
    for flavour, amount in delta.items():
        value = target.get(flavour, 0) + sign * amount
        if value:
            target[flavour] = value
        else:
            target.pop(flavour, None)


def request_amounts(request: TaskRequest, gpu_model: str | None) -> Amounts:
    amounts: Amounts = {}
    add_into(amounts, {CPU: request.cpu_milli, MEMORY: request.memory_mib})
    if request.gpu_count and gpu_model is not None:
        add_into(amounts, {gpu_flavour(gpu_model): request.total_gpu_milli})
    return amounts


def job_demand(job: Job, gpu_model: str | None) -> Amounts:
    total: Amounts = {}
    for task in job.tasks:
        add_into(total, request_amounts(task.request, gpu_model))
    return total


def placed_amounts(job: Job, placements: Iterable[TaskPlacement], nodes: Mapping[str, Node]) -> Amounts:
    """What a placed job really holds: its GPU flavour is the model of the node each task landed on."""
    requests = {task.id: task.request for task in job.tasks}
    total: Amounts = {}
    for placement in placements:
        add_into(total, request_amounts(requests[placement.task_id], nodes[placement.node_id].gpu_model))
    return total


def job_gpu_models_allowed(job: Job) -> tuple[str, ...] | None:
    """The GPU models every GPU task of the job accepts; None when no task restricts the model."""
    allowed: set[str] | None = None
    for task in job.tasks:
        if task.request.gpu_count and task.request.gpu_models:
            models = set(task.request.gpu_models)
            allowed = models if allowed is None else allowed & models
    return None if allowed is None else tuple(sorted(allowed))


def job_uses_gpu(job: Job) -> bool:
    return any(task.request.gpu_count for task in job.tasks)
