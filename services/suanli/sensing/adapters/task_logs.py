"""The agent's task logs: one file per attempt (``<task id>.<attempt>.log``, stdout and stderr together)
and beside it whose attempt it is (``<task id>.<attempt>.json``: tenant and job, from the placement).

The owner file is what lets the logs endpoint keep each tenant to its own attempts after the task has
ended and the agent has forgotten the placement (also across agent restarts).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from suanli.errors import InvalidArgument, NotFound
from suanli.jobspec.ids import id_problem
from suanli.sensing.domain.placement import Placement

CHUNK_BYTES = 64 * 1024
# How often a followed log is read again for new output while its attempt runs.
FOLLOW_POLL_S = 0.2

# (task id, attempt) -> whether that attempt still runs here (the agent's task table answers).
Active = Callable[[str, int], bool]


@dataclass(frozen=True, slots=True)
class LogOwner:
    """Whose attempt a log is: the tenant and job its placement named."""

    tenant: str
    job_id: str


def log_name(task_id: str, attempt: int) -> str:
    return f"{task_id}.{attempt}"


def write_owner(log_dir: Path, placement: Placement) -> None:
    """Record the placement's tenant and job beside its log (the launcher calls it before starting)."""
    path = log_dir / f"{log_name(placement.task_id, placement.attempt)}.json"
    path.write_text(json.dumps({"tenant": placement.tenant, "job_id": placement.job_id}))


class TaskLogNotFound(NotFound):
    def __init__(self, node_id: str, task_id: str, attempt: int) -> None:
        super().__init__(f"node {node_id} keeps no log of task {task_id} attempt {attempt}")


class TaskLogs:
    """Reads the logs of the attempts this agent ran, from ``log_dir``."""

    def __init__(self, log_dir: Path, node_id: str, active: Active | None = None) -> None:
        self.log_dir = log_dir.resolve()
        self.node_id = node_id
        # Bound once the agent exists (the endpoint starts before it, so its address can be a label).
        self.active: Active = active or (lambda task_id, attempt: False)

    def owner(self, task_id: str, attempt: int) -> LogOwner:
        """Whose the attempt is; `TaskLogNotFound` when this agent keeps no log of it."""
        problem = id_problem(task_id, "task_id")
        if problem is not None:
            raise InvalidArgument(problem)
        if attempt < 1:
            raise InvalidArgument(f"attempt {attempt}: attempts count from 1")
        name = log_name(task_id, attempt)
        try:
            record = json.loads((self.log_dir / f"{name}.json").read_text())
        except (OSError, ValueError):
            raise TaskLogNotFound(self.node_id, task_id, attempt) from None
        if not (self.log_dir / f"{name}.log").exists():
            raise TaskLogNotFound(self.node_id, task_id, attempt)
        return LogOwner(str(record.get("tenant") or ""), str(record.get("job_id") or ""))

    async def read(
        self, task_id: str, attempt: int, *, follow: bool, poll_s: float = FOLLOW_POLL_S
    ) -> AsyncIterator[bytes]:
        """The attempt's output from its start; with ``follow``, until the attempt is no longer active."""
        path = self.log_dir / f"{log_name(task_id, attempt)}.log"
        with path.open("rb") as log:
            while True:
                # Asked before reading: output written up to the end is then read in full below.
                running = follow and self.active(task_id, attempt)
                while chunk := log.read(CHUNK_BYTES):
                    yield chunk
                if not running:
                    return
                await asyncio.sleep(poll_s)
