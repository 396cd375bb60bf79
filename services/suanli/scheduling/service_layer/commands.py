"""Commands the job commands handle (imperative); each has one handler or planner in `JobCommands`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from suanli.scheduling.domain.jobs import AcceptedSpec, Actor
from suanli.scheduling.domain.queueing import QueueSpec
from suanli.scheduling.service_layer.queues_config import QueueConfig


@dataclass(frozen=True, slots=True)
class SubmitJob:
    spec: AcceptedSpec  # validated; task ids are assigned from the job id
    by: Actor | None = None  # the caller, recorded on JobSubmitted (None without authentication)


@dataclass(frozen=True, slots=True)
class CancelJob:
    job_id: str
    reason: str = ""
    requested_by: str = ""
    by: Actor | None = None  # the caller, recorded on JobCancelled (None without authentication)


@dataclass(frozen=True, slots=True)
class RecordTaskReport:
    """TaskStarted / TaskFinished / TaskFailed from `tasks.lifecycle`."""

    name: str
    record: Mapping[str, Any]
    event_id: str


@dataclass(frozen=True, slots=True)
class MarkNodeLost:
    node_id: str
    lost_at: datetime
    # Lost long enough to be believed: only then are non-preemptible jobs requeued (`lost_on`).
    confirmed: bool = True


@dataclass(frozen=True, slots=True)
class ReconcileNode:
    snapshot: Mapping[str, Any]  # a decoded NodeSnapshot


@dataclass(frozen=True, slots=True)
class SeedQueues:
    """The queue file: recorded only into a store that holds no queue state yet (docs/queues.md)."""

    config: QueueConfig


# Queue administration (`queue_admin`). `request_id`: the idempotency key; a retry with it answers the
# first outcome, the same key with another request is ALREADY_EXISTS.


@dataclass(frozen=True, slots=True)
class CreateQueue:
    spec: QueueSpec
    request_id: str = ""
    by: Actor | None = None


@dataclass(frozen=True, slots=True)
class UpdateQueue:
    spec: QueueSpec  # the full new spec, replacing the recorded one
    request_id: str = ""
    by: Actor | None = None


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    name: str
    request_id: str = ""
    by: Actor | None = None


@dataclass(frozen=True, slots=True)
class DefinePriorityClass:
    name: str
    value: int
    request_id: str = ""
    by: Actor | None = None


@dataclass(frozen=True, slots=True)
class DeletePriorityClass:
    name: str
    request_id: str = ""
    by: Actor | None = None


AdminCommand = CreateQueue | UpdateQueue | DeleteQueue | DefinePriorityClass | DeletePriorityClass
Command = SubmitJob | CancelJob | RecordTaskReport | MarkNodeLost | ReconcileNode | SeedQueues | AdminCommand
