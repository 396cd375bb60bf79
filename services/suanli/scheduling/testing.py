"""Builders of the commands the scheduler's service layer receives, as an agent's reports arrive (tests and
benches that drive the service layer without a broker)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from suanli.scheduling.domain.jobs import TaskRun
from suanli.scheduling.service_layer.commands import RecordTaskReport


def task_report(
    name: str, task: TaskRun, job_id: str, occurred_at: datetime, **extra: Any
) -> RecordTaskReport:
    """A `name` report (TaskStarted, TaskFinished, ...) about `task`'s current attempt, with a fresh event
    id; ``extra``: the event's own fields (``exit_code``, ``device_indices``, ...)."""
    record = {
        "event_id": str(uuid.uuid4()),
        "occurred_at": occurred_at,
        "producer": "agent",
        "subject_id": task.task_id,
        "task_id": task.task_id,
        "job_id": job_id,
        "node_id": task.node_id,
        "attempt": task.attempt,
        **extra,
    }
    return RecordTaskReport(name, record, record["event_id"])
