"""Admission in waves: a job with more tasks than the wave size is placed a wave at a time.

A burst of placements is work for the agents (start a task, report it, list it in every snapshot) and
for every consumer downstream; a node's agent that cannot keep up reports late and is taken for lost.
So a large job is placed ``size`` tasks at a time, and its next wave is considered only once every task
of the previous wave has started: the agents' own reports pace the job.

A guaranteed job whose gang (``min_available``, all its tasks when unset) is larger than a wave cannot
be split and is placed whole, as before. Best-effort work is always placed in waves: it runs on borrowed
room and may be preempted at any moment, so it has no all-together guarantee to keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.scheduling.domain.jobs.aggregate import JobView, TaskRunState

DEFAULT_WAVE_SIZE = 100
WAITING_FOR_WAVE = "WAITING_FOR_WAVE"


@dataclass(frozen=True, slots=True)
class Wave:
    """The tasks the cycle may place now (empty: the previous wave has not started yet)."""

    task_ids: tuple[str, ...]
    placed: int  # tasks of the job placed and not yet started
    started: int  # tasks of the job started (running or ended) in this attempt
    total: int
    size: int

    def reason(self) -> dict[str, object]:
        """The pending reason of a job waiting for its previous wave to start."""
        message = (
            f"placed in waves of {self.size}: {self.started} of {self.total} tasks started, "
            f"{self.placed} placed and not started yet; the next wave waits for them"
        )
        return {
            "code": WAITING_FOR_WAVE,
            "message": message,
            "placed": self.placed,
            "started": self.started,
            "total": self.total,
            "wave_size": self.size,
        }


def in_waves(job: JobView, size: int) -> bool:
    """Whether the job is placed in waves of ``size`` (0 turns waves off)."""
    if size <= 0 or len(job.tasks) <= size:
        return False
    return job.spec.best_effort or job.spec.min_available <= size


def next_wave(job: JobView, size: int) -> Wave | None:
    """The job's next wave, or None when waves do not apply (small job, gang larger than a wave, nothing
    left to place, or the job is winding down: then the job is handled as a whole)."""
    if not in_waves(job, size) or job.phase.final or job.winding_down:
        return None
    pending = [t.task_id for t in job.tasks if t.state is TaskRunState.PENDING]
    if not pending:
        return None
    placed = sum(1 for t in job.tasks if t.state is TaskRunState.PLACED)
    started = len(job.tasks) - len(pending) - placed
    ready = () if placed else tuple(pending[:size])
    return Wave(ready, placed, started, len(job.tasks), size)
