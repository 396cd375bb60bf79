"""Jobs for the listing tests (the job index and the list RPCs): numbered, round robin over three queues of
two tenants."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TypeVar

from suanli.scheduling.domain.jobs import (
    AcceptedSpec,
    AcceptedTask,
    JobCancelled,
    JobSubmitted,
    JobView,
    evolve,
    submitted,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
QUEUES = ("acme", "acme/vision", "globex")
T = TypeVar("T")


def job(seq: int, queue: str | None = None) -> JobView:
    """Job ``job-<seq>``, numbered ``seq``, in ``queue`` (default: QUEUES round robin by ``seq``)."""
    queue = QUEUES[seq % len(QUEUES)] if queue is None else queue
    spec = AcceptedSpec(f"j{seq}", queue, (AcceptedTask(f"j{seq}-t", "t", cpu_milli=100),))
    return submitted(JobSubmitted(f"job-{seq}", spec), seq, T0)


def cancelled(view: JobView) -> JobView:
    return evolve(view, JobCancelled(view.id, "enough"), view.version + 1, T0)


def flat(pages: Iterable[list[T]]) -> list[T]:
    """The items of a listing's pages, in order."""
    return [item for page in pages for item in page]
