"""The events of a job's stream `job-<id>`, typed: one frozen dataclass per event of the Avro catalogue.

Decided by the scheduler (published from the outbox): JobSubmitted, TaskPlaced, TaskPreempted,
TaskStopRequested, JobRequeued, JobSucceeded, JobFailed, JobCancelled. Learnt about its tasks (recorded in
the stream, never published again): TaskStarted, TaskFinished, TaskFailed, as a node reported them, or
established by the scheduler for a lost node or a task a node stopped reporting.

Field names are those of the Avro records; the envelope (event id, time, producer) is not part of an
event here. Converting to and from the stored records is the service layer's business (`payloads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from suanli.scheduling.domain.jobs.spec import AcceptedSpec


class Cause(StrEnum):
    """Why a job was requeued (the `cause` enum of JobRequeued)."""

    UNKNOWN = "UNKNOWN"
    TASK_FAILED = "TASK_FAILED"
    PREEMPTED = "PREEMPTED"
    NODE_LOST = "NODE_LOST"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asked for a command, as their verified token names them (the `principal` of an event)."""

    subject: str
    tenant: str
    token_id: str


@dataclass(frozen=True, slots=True)
class JobSubmitted:
    job_id: str
    spec: AcceptedSpec
    submitted_by: Actor | None = None  # None: the service runs without authentication


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """Milli-GPU of one device given to a placed task."""

    index: int
    milli: int


@dataclass(frozen=True, slots=True)
class PlacedRequests:
    """What a placed task asks of its node, as the agent enforces it."""

    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_milli: int
    gpu_memory_mib: int
    gpu_model: str | None


@dataclass(frozen=True, slots=True)
class TaskPlaced:
    job_id: str
    task_id: str
    node_id: str
    region: str
    site: str
    devices: tuple[DeviceShare, ...]
    requests: PlacedRequests
    attempt: int
    cycle: int = 0
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # in the order sent
    duration_s: float | None = None
    queue: str = ""
    tenant: str = ""
    best_effort: bool = False
    rtt_ms: float | None = None  # to the job's data region, as placement knew it
    price_per_hour: float | None = None  # expected, from the price book


@dataclass(frozen=True, slots=True)
class TaskStarted:
    task_id: str
    job_id: str
    node_id: str
    attempt: int
    device_indices: tuple[int, ...] = ()
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class TaskFinished:
    task_id: str
    job_id: str
    node_id: str
    attempt: int
    exit_code: int


@dataclass(frozen=True, slots=True)
class TaskFailed:
    task_id: str
    job_id: str
    node_id: str
    attempt: int
    reason: str
    kind: str = "UNKNOWN"  # the FailureKind of the execution contract; NODE_LOST means the task is lost
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class TaskPreempted:
    job_id: str
    task_id: str
    node_id: str
    attempt: int
    reason: str
    preemptor_job_id: str | None = None


@dataclass(frozen=True, slots=True)
class TaskStopRequested:
    job_id: str
    task_id: str
    node_id: str
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class JobRequeued:
    job_id: str
    tenant: str
    queue: str
    attempt: int
    restarts: int
    cause: Cause = Cause.UNKNOWN
    reason: str = ""
    failed_task_id: str | None = None


@dataclass(frozen=True, slots=True)
class JobSucceeded:
    job_id: str
    tenant: str
    queue: str


@dataclass(frozen=True, slots=True)
class JobFailed:
    job_id: str
    tenant: str
    queue: str
    reason: str
    failed_task_id: str | None = None


@dataclass(frozen=True, slots=True)
class JobCancelled:
    job_id: str
    reason: str = ""
    requested_by: str = ""
    by: Actor | None = None  # None: the service runs without authentication


TaskReport = TaskStarted | TaskFinished | TaskFailed
"""What a node tells about its task (from `tasks.lifecycle`)."""

TaskEvent = TaskPlaced | TaskStarted | TaskFinished | TaskFailed | TaskPreempted | TaskStopRequested
"""An event about one task of a job."""

JobEvent = TaskEvent | JobSubmitted | JobRequeued | JobSucceeded | JobFailed | JobCancelled
"""Any event of a job's stream."""

# Recorded events after which a waiting job may fit: a task's room is given back, or its job is requeued.
ROOM_GIVEN_BACK: tuple[type[JobEvent], ...] = (TaskFinished, TaskFailed, TaskPreempted, JobRequeued)


def event_name(event: JobEvent) -> str:
    """The event's name in the catalogue (and in the store)."""
    return type(event).__name__
