"""Queue administration requests -> the `QueueSpec` or `PriorityClass` they ask for, or `InvalidSpec`
naming the first bad field by its path (`queue.quotas[1].maximum: 4000 below guaranteed 8000`). Only the
request's own shape is checked here; whether it fits the recorded queue set (parent exists, name free,
no live jobs) is the domain's rule (`domain.queueing.admin`)."""

from __future__ import annotations

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.jobspec import limits
from suanli.scheduling.domain.queueing import CPU, MEMORY, PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.domain.queueing.resources import gpu_model_of
from suanli.scheduling.service_layer.errors import InvalidSpec

# Far beyond any fleet (a million GPUs in milli, or cores in milli), small enough to stay exact anywhere.
MAX_AMOUNT = 10**12
MAX_PRIORITY = 10**9
MAX_FLAVOURS = 64


def _check(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise InvalidSpec(field, message)


def request_id(value: str) -> str:
    _check(
        len(value) <= limits.MAX_REQUEST_ID,
        "request_id",
        f"must be at most {limits.MAX_REQUEST_ID} characters",
    )
    return value


def queue_name(value: str, field: str = "name") -> str:
    _check(bool(value), field, "is required")
    problem = limits.queue_problem(value)
    _check(problem is None, field, problem or "")
    return value


def _amount(value: int, field: str) -> None:
    _check(0 <= value <= MAX_AMOUNT, field, f"must be 0..{MAX_AMOUNT} (got {value})")


def _flavour(value: str, field: str) -> None:
    model = gpu_model_of(value)
    ok = value in (CPU, MEMORY) or (model is not None and bool(model.strip()) and model == model.strip())
    _check(ok, field, f"must be 'cpu', 'memory' or 'gpu:<model>' (got {value!r})")


def _quota(q: pb.QuotaSpec, field: str) -> ResourceQuota:
    _flavour(q.flavour, f"{field}.flavour")
    _amount(q.guaranteed, f"{field}.guaranteed")
    optional: dict[str, int | None] = {}
    for name in ("maximum", "borrowing_limit", "lending_limit"):
        value = getattr(q, name) if q.HasField(name) else None
        if value is not None:
            _amount(value, f"{field}.{name}")
        optional[name] = value
    maximum, lending = optional["maximum"], optional["lending_limit"]
    _check(
        maximum is None or maximum >= q.guaranteed,
        f"{field}.maximum",
        f"{maximum} is below guaranteed {q.guaranteed}",
    )
    _check(
        lending is None or lending <= q.guaranteed,
        f"{field}.lending_limit",
        f"must be in 0..guaranteed ({q.guaranteed}), got {lending}",
    )
    return ResourceQuota(q.flavour, q.guaranteed, maximum, optional["borrowing_limit"], lending)


def queue_spec(message: pb.QueueSpec, present: bool, field: str = "queue") -> QueueSpec:
    """`present`: whether the request carries the message at all (a missing one is named as such)."""
    _check(present, field, "is required")
    name = queue_name(message.name, f"{field}.name")
    if message.cohort:
        problem = limits.name_problem(message.cohort, "a cohort name")
        _check(problem is None, f"{field}.cohort", problem or "")
    _check(
        len(message.quotas) <= MAX_FLAVOURS,
        f"{field}.quotas",
        f"at most {MAX_FLAVOURS} flavours (got {len(message.quotas)})",
    )
    quotas = []
    seen: dict[str, int] = {}
    for i, q in enumerate(message.quotas):
        path = f"{field}.quotas[{i}]"
        quotas.append(_quota(q, path))
        _check(
            q.flavour not in seen,
            f"{path}.flavour",
            f"{q.flavour!r} is listed twice (also at [{seen.get(q.flavour)}])",
        )
        seen[q.flavour] = i
    return QueueSpec(name, tuple(quotas), message.cohort or None, message.stopped)


def class_name(value: str, field: str = "name") -> str:
    _check(bool(value), field, "is required")
    problem = limits.name_problem(value, "a priority class name")
    _check(problem is None, field, problem or "")
    return value


def priority_class(message: pb.PriorityClass, present: bool) -> PriorityClass:
    _check(present, "priority_class", "is required")
    name = class_name(message.name, "priority_class.name")
    _check(
        -MAX_PRIORITY <= message.value <= MAX_PRIORITY,
        "priority_class.value",
        f"must be in -{MAX_PRIORITY}..{MAX_PRIORITY} (got {message.value})",
    )
    return PriorityClass(name, message.value)
