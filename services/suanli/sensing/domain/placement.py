"""Orders from the scheduler, as the agent understands them: place a task, or stop one.

The wire records are `TaskPlaced`, `TaskPreempted` and `TaskStopRequested` on ``placements``. Parsing
validates what the agent relies on; a record that fails raises `InvalidOrder`, which the consumer
dead-letters with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from suanli.jobspec.ids import id_problem
from suanli.jobspec.limits import ENV_NAME

MILLI = 1000
# TaskPlaced v1 had no duration field: a simulated agent then reads it from the task's environment.
SIM_DURATION_ENV = "SUANLI_SIM_DURATION_S"
# TaskStopRequested's attempt 0: whatever attempt of the task runs on the node.
ANY_ATTEMPT = 0


class InvalidOrder(ValueError):
    """A placement or preemption the agent cannot act on (missing or out-of-range field)."""


@dataclass(frozen=True, slots=True)
class DeviceShare:
    index: int
    milli: int = MILLI


@dataclass(frozen=True, slots=True)
class Placement:
    task_id: str
    job_id: str
    node_id: str
    attempt: int
    devices: tuple[DeviceShare, ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_memory_mib: int = 0
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    duration_s: float | None = None  # TaskPlaced v2's own field; wins over the environment
    tenant: str = ""  # TaskPlaced v3: whose task it is (picks a run-as user, when configured)

    @property
    def device_indices(self) -> tuple[int, ...]:
        return tuple(d.index for d in self.devices)

    def sim_duration_s(self, default_s: float) -> float:
        if self.duration_s is not None:
            return self.duration_s
        raw = self.env.get(SIM_DURATION_ENV)
        if raw is None:
            return default_s
        try:
            value = float(raw)
        except ValueError:
            raise InvalidOrder(f"{SIM_DURATION_ENV}={raw!r} is not a number") from None
        if value < 0:
            raise InvalidOrder(f"{SIM_DURATION_ENV} must be >= 0, got {value}")
        return value


@dataclass(frozen=True, slots=True)
class StopOrder:
    task_id: str
    job_id: str
    node_id: str
    attempt: int  # ANY_ATTEMPT (0): whatever attempt runs here
    reason: str
    preempted: bool = True  # TaskPreempted; False for TaskStopRequested (cancel, gang stop, reconcile)

    def matches(self, attempt: int) -> bool:
        return self.attempt == ANY_ATTEMPT or self.attempt == attempt


def _safe_id(record: Mapping[str, Any], name: str) -> str:
    """An id that becomes a name on this node (the task's log file, its environment): the kernel's id
    rule, so it never holds a path separator, never starts with a dot (no "..") and is never too long."""
    value = _text(record, name)
    problem = id_problem(value, name)
    if problem is not None:
        raise InvalidOrder(problem)
    return value


def _task_id(record: Mapping[str, Any]) -> str:
    return _safe_id(record, "task_id")


def parse_placement(record: Mapping[str, Any]) -> Placement:
    """A `Placement` from a decoded `TaskPlaced` record."""
    task_id = _task_id(record)
    requests = record.get("requests") or {}
    devices = tuple(DeviceShare(int(d["index"]), int(d["milli"])) for d in record.get("devices") or ())
    for share in devices:
        if share.index < 0 or not 0 < share.milli <= MILLI:
            raise InvalidOrder(f"task {task_id}: device share {share} out of range")
    if len({d.index for d in devices}) != len(devices):
        raise InvalidOrder(f"task {task_id}: a device is listed twice")
    env = {str(k): str(v) for k, v in (record.get("env") or {}).items()}
    for key, value in env.items():
        # A name with '=' or a NUL anywhere could not be passed to exec, or would smuggle a second name.
        if not ENV_NAME.match(key) or "\x00" in value:
            raise InvalidOrder(f"task {task_id}: bad environment variable {key[:80]!r}")
    duration = record.get("duration_s")
    if duration is not None and (not isinstance(duration, int | float) or not duration >= 0):
        raise InvalidOrder(f"task {task_id}: duration_s must be a number >= 0, got {duration!r}")
    tenant = record.get("tenant")
    return Placement(
        task_id=task_id,
        job_id=_safe_id(record, "job_id"),
        node_id=_safe_id(record, "node_id"),
        tenant=tenant if isinstance(tenant, str) else "",
        attempt=_positive(record, "attempt"),
        devices=devices,
        cpu_milli=max(0, int(requests.get("cpu_milli") or 0)),
        memory_mib=max(0, int(requests.get("memory_mib") or 0)),
        gpu_memory_mib=max(0, int(requests.get("gpu_memory_mib") or 0)),
        command=tuple(str(a) for a in record.get("command") or ()),
        env=env,
        duration_s=None if duration is None else float(duration),
    )


def parse_stop(record: Mapping[str, Any]) -> StopOrder:
    """A `StopOrder` from a decoded `TaskPreempted` record."""
    return StopOrder(
        task_id=_task_id(record),
        job_id=_safe_id(record, "job_id"),
        node_id=_safe_id(record, "node_id"),
        attempt=_positive(record, "attempt"),
        reason=str(record.get("reason") or "preempted"),
    )


def parse_stop_request(record: Mapping[str, Any]) -> StopOrder:
    """A `StopOrder` from a decoded `TaskStopRequested` record.

    Unlike a preemption, the job id may be empty (the scheduler does not know the task: reconciliation
    found it on the node) and the attempt may be 0 (stop whatever attempt runs here).
    """
    attempt = record.get("attempt")
    if not isinstance(attempt, int) or attempt < ANY_ATTEMPT:
        raise InvalidOrder(f"attempt must be an integer >= 0, got {attempt!r}")
    job_id = record.get("job_id")
    return StopOrder(
        task_id=_task_id(record),
        job_id=job_id if isinstance(job_id, str) else "",
        node_id=_safe_id(record, "node_id"),
        attempt=attempt,
        reason=str(record.get("reason") or "stop requested"),
        preempted=False,
    )


def _text(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidOrder(f"{name} must be a non-empty string, got {value!r}")
    return value


def _positive(record: Mapping[str, Any], name: str) -> int:
    value = record.get(name)
    if not isinstance(value, int) or value < 1:
        raise InvalidOrder(f"{name} must be an integer >= 1, got {value!r}")
    return value


def task_environment(placement: Placement, node_id: str) -> dict[str, str]:
    """What a launched task is told about its placement, on top of the job's own environment.

    ``CUDA_VISIBLE_DEVICES`` is always set, to "" for a task without devices, so it cannot see (and use)
    GPUs it was not given. A shared device's share goes in ``SUANLI_GPU_MILLI``, and also as the MPS
    thread percentage, which CUDA honours when an MPS daemon serves the device and ignores otherwise.
    """
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in placement.device_indices),
        "SUANLI_TASK_ID": placement.task_id,
        "SUANLI_JOB_ID": placement.job_id,
        "SUANLI_ATTEMPT": str(placement.attempt),
        "SUANLI_NODE_ID": node_id,
        "SUANLI_CPU_MILLI": str(placement.cpu_milli),
        "SUANLI_MEMORY_MIB": str(placement.memory_mib),
    }
    if placement.devices:
        milli = min(d.milli for d in placement.devices)
        env["SUANLI_GPU_MILLI"] = str(milli)
        if milli < MILLI:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, milli // 10))
    if placement.gpu_memory_mib:
        env["SUANLI_GPU_MEMORY_MIB"] = str(placement.gpu_memory_mib)
    return env
