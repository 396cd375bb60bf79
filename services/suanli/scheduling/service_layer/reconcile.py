"""Level-triggered reconciliation of one node: what PostgreSQL says should run there against the task
ids its agent reports in every NodeSnapshot.

- placed but not reported after the grace period: the placement is sent again;
- running but not reported for the whole grace period: the task is gone (agent restarted, order lost):
  recorded as lost, so the job restarts;
- stopping and not reported: it has stopped; stopping and still reported: the stop order is sent again;
- reported but not expected there (unknown, finished, or moved on): the node is told to stop it.

So a lost message or a broker that lost every topic heals with the next snapshots. Every discrepancy
must be older than `grace` (since the task's last change, or the last order sent) before it is acted on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from suanli.scheduling.domain.jobs import (
    JobEvent,
    JobView,
    TaskFailed,
    TaskRun,
    TaskRunState,
    TaskStopRequested,
    stop_order,
)

Regions = Mapping[str, tuple[str, str]]
Resend = Callable[[JobView, TaskRun], JobEvent]  # the TaskPlaced sent again for a placed task
ALWAYS = datetime.min.replace(tzinfo=UTC)  # reports_since for a caller that feeds reports itself


@dataclass(slots=True)
class NodeActions:
    per_job: dict[str, list[JobEvent]] = field(default_factory=dict)
    unknown_stops: list[TaskStopRequested] = field(default_factory=list)
    node_id: str = ""
    taken_at: datetime | None = None

    def __bool__(self) -> bool:
        return bool(self.per_job or self.unknown_stops)


@dataclass(slots=True)
class Reconciler:
    grace: timedelta
    # (node, task) -> when a stop for a task the scheduler does not expect there was last sent.
    _stops_sent: dict[tuple[str, str], datetime] = field(default_factory=dict)
    # (node, task, attempt) -> the first snapshot that no longer listed a running task. A task that just
    # ended leaves the node's snapshots before its TaskFinished (another topic) arrives here, so the
    # absence itself must outlast the grace before the task counts as lost.
    _missing_since: dict[tuple[str, str, int], datetime] = field(default_factory=dict)
    # When the consumer of tasks.lifecycle last got its partitions; None while it has none. A task's
    # absence only means it is gone if its end report could have arrived meanwhile: after a restart the
    # consumer group waits out the dead member's session (seconds) before reports flow, and a task that
    # finished in that gap must not be taken for lost (and run a second time). The app sets it; the
    # default (always flowing) suits a caller that feeds reports and snapshots itself.
    reports_since: datetime | None = ALWAYS

    def reconcile(
        self,
        jobs: Mapping[str, JobView],
        snapshot: Mapping[str, Any],
        now: datetime,
        resend: Resend,
        owner: Callable[[str], JobView | None] | None = None,
    ) -> NodeActions:
        """`resend(job, task)` builds the TaskPlaced decision sent again for a placed task. `jobs` needs
        only the jobs that may hold room; `owner(task_id)` finds any task's job (default: search `jobs`)."""
        node_id = snapshot["node_id"]
        taken_at: datetime = snapshot["occurred_at"]
        actions = NodeActions(node_id=node_id, taken_at=taken_at)
        if taken_at < now - self.grace:
            return actions  # an old snapshot (a replay): the next fresh one decides
        reported = set(snapshot.get("task_ids") or ())
        expected: set[str] = set()
        for job in jobs.values():
            for task in job.active:
                if task.node_id != node_id:
                    continue
                expected.add(task.task_id)
                decision = self._task(node_id, job, task, task.task_id in reported, taken_at, resend)
                if decision is not None:
                    actions.per_job.setdefault(job.id, []).append(decision)
        for key in [k for k in self._missing_since if k[0] == node_id and k[1] not in expected]:
            del self._missing_since[key]
        unexpected = sorted(reported - expected)
        if owner is None and unexpected:
            owners = {t.task_id: job for job in jobs.values() for t in job.tasks}
            owner = owners.get
        for task_id in unexpected:
            assert owner is not None
            holder = owner(task_id)
            run = holder.task(task_id) if holder is not None else None
            if run is not None and run.since is not None and run.since > taken_at - self.grace:
                continue  # it ended or moved a moment ago; the node may not have caught up yet
            last = self._stops_sent.get((node_id, task_id))
            if last is not None and last > taken_at - self.grace:
                continue
            actions.unknown_stops.append(
                TaskStopRequested(
                    holder.id if holder is not None else "",
                    task_id,
                    node_id,
                    0,
                    "the scheduler does not expect this task on this node",
                )
            )
        return actions

    def sent(self, actions: NodeActions) -> None:
        """The actions are recorded: their stops count as sent (a plan deferred or refused sent nothing,
        so its stops must not hold back the next snapshot's)."""
        assert actions.taken_at is not None
        for stop in actions.unknown_stops:
            self._stops_sent[(actions.node_id, stop.task_id)] = actions.taken_at

    def _task(
        self, node_id: str, job: JobView, task: TaskRun, seen: bool, taken_at: datetime, resend: Resend
    ) -> JobEvent | None:
        missing = (node_id, task.task_id, task.attempt)
        if seen or task.state is not TaskRunState.RUNNING:
            self._missing_since.pop(missing, None)
        if task.since is None or task.since > taken_at - self.grace:
            return None
        if task.state is TaskRunState.PLACED and not seen:
            return resend(job, task)
        if task.state is TaskRunState.RUNNING and not seen:
            missing_since = self._missing_since.setdefault(missing, taken_at)
            if not self._reports_heard_since(max(missing_since, task.since), taken_at):
                return None
            return _gone(job, task, "NODE_LOST", f"node {task.node_id} no longer reports the task")
        if task.state is TaskRunState.STOPPING:
            if seen:
                return stop_order(job, task, task.reason or "stop")
            if not self._reports_heard_since(task.since, taken_at):
                return None
            return _gone(job, task, "KILLED", f"stopped: node {task.node_id} no longer reports the task")
        return None

    def _reports_heard_since(self, since: datetime, taken_at: datetime) -> bool:
        """Whether reports have been consumed for a whole grace period since ``since``: only then is a
        missing end report evidence that the task is gone."""
        if self.reports_since is None:
            return False
        return max(since, self.reports_since) <= taken_at - self.grace


def _gone(job: JobView, task: TaskRun, kind: str, reason: str) -> TaskFailed:
    return TaskFailed(task.task_id, job.id, task.node_id, task.attempt, reason, kind, exit_code=None)
