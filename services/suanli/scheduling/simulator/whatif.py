"""What-if replay: accepted job specs arrive at given times (or at a seeded Poisson rate) on a given fleet and
run for their simulated durations, placed by the live scheduler's own cycle (`schedule_cycle`: queues,
quotas, priorities, gangs, preemption, backfill) on the live scheduler's placer (`FrameworkPlacer`).

Time moves from event to event: at each instant the tasks that end there leave, the jobs that arrive there
join the pending set, and a cycle runs while anything is pending. A preempted job loses its running tasks
and goes back to pending whole (it restarts, as a requeued job does); the instant's cycle is run again so
the preemptor takes the room it freed. Tasks past a gang's `min_available` that did not fit with it wait as
pending work of the same job. A job never placed when nothing is left to happen keeps the reason of the
last cycle that saw it.

The openb modes (`runner`, `timeline`) are separate: they place pods one at a time without queues.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from suanli.scheduling.adapters.framework_placer import FrameworkPlacer, workload_typical
from suanli.scheduling.domain.jobs import AcceptedSpec
from suanli.scheduling.domain.model import GPU_MILLI, Node, TaskPlacement
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    PendingReason,
    PriorityClass,
    QueueSpec,
    RunningWorkload,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.simulator.runner import WORKLOAD_STREAM
from suanli.scheduling.simulator.timeline import TimelineResult

DEFAULT_QUEUE = "default"
# A preemption frees room for the preemptor in the next cycle of the same instant; past this many rounds at
# one instant the rest waits for the next event (a guard: each round needs a higher-priority preemptor).
MAX_ROUNDS_PER_INSTANT = 16
LEAVE, ARRIVE = 0, 1  # at equal times departures go first so their room is usable at once


@dataclass(frozen=True, slots=True)
class WhatIfJob:
    """One job to replay: its accepted spec (every task with a duration), where it came from (for
    messages and the report) and its arrival time (None: drawn from the rate)."""

    id: str
    source: str
    spec: AcceptedSpec
    arrival_s: float | None = None


@dataclass(frozen=True, slots=True)
class WhatIfSetup:
    """The fleet and the scheduler's configuration the jobs are replayed against."""

    nodes: tuple[Node, ...]
    queues: tuple[QueueSpec, ...] = (QueueSpec(DEFAULT_QUEUE),)
    priority_classes: tuple[PriorityClass, ...] = ()
    network: NetworkSnapshot = EMPTY_NETWORK
    rate_per_s: float | None = None  # arrivals of jobs without a time: Poisson at this rate from t=0

    @property
    def capacity_gpu_milli(self) -> int:
        return sum(len(n.gpus) for n in self.nodes) * GPU_MILLI


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job_id: str
    name: str
    queue: str
    source: str
    arrival_s: float
    started_s: float | None  # when its first tasks were placed (None: never)
    preempted: int
    reason: dict[str, Any] | None = None  # never placed: the last cycle's pending reason

    @property
    def wait_s(self) -> float | None:
        return None if self.started_s is None else self.started_s - self.arrival_s


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    timeline: TimelineResult  # allocation and queue length per event, delays of placed jobs
    jobs: tuple[JobOutcome, ...]
    capacity_gpu_milli: int
    unallocated_pct: float  # time-weighted, first arrival to the last event
    unallocated_pct_while_waiting: float | None  # the same over the spans with a job pending
    cycles: int

    @property
    def policy(self) -> str:
        return self.timeline.policy

    @property
    def seed(self) -> int:
        return self.timeline.seed


def arrival_times(jobs: Sequence[WhatIfJob], rate_per_s: float | None, seed: int) -> list[float]:
    """Each job's arrival: its own time, else (with a rate) the next of a seeded Poisson process from t=0
    in input order, else 0. The draw depends on the seed only, so every policy sees the same arrivals."""
    if rate_per_s is not None and not rate_per_s > 0:
        raise ValueError(f"rate must be > 0 jobs/s, got {rate_per_s}")
    missing = sum(1 for j in jobs if j.arrival_s is None)
    gaps: list[float] = []
    if rate_per_s is not None and missing:
        rng = np.random.default_rng([seed, WORKLOAD_STREAM])
        gaps = [float(t) for t in np.cumsum(rng.exponential(1.0 / rate_per_s, size=missing))]
    drawn = iter(gaps)
    return [j.arrival_s if j.arrival_s is not None else next(drawn, 0.0) for j in jobs]


@dataclass
class _Live:
    """A job during the replay."""

    job: WhatIfJob
    seq: int
    arrival_s: float
    pending: tuple[str, ...] = ()  # task ids waiting to be placed
    running: dict[str, TaskPlacement] = field(default_factory=dict)
    attempt: int = 0  # bumped on preemption: task ends of an earlier attempt are stale
    started_s: float | None = None
    preempted: int = 0

    # The queueing core's view per set of task ids: most jobs wait or run unchanged over many cycles.
    _views: dict[tuple[str, ...], Workload] = field(default_factory=dict)

    def workload(self, task_ids: tuple[str, ...]) -> Workload:
        found = self._views.get(task_ids)
        if found is None:
            spec = self.job.spec
            found = Workload(spec.domain_job(self.job.id, task_ids), self.seq, spec.priority_class or None)
            self._views[task_ids] = found
        return found


class _Replay:
    def __init__(self, setup: WhatIfSetup, jobs: Sequence[WhatIfJob], policy: str, seed: int) -> None:
        self.setup, self.policy, self.seed = setup, policy, seed
        self.profile = policy_profile(policy)
        self.typical = workload_typical([t.request() for j in jobs for t in j.spec.tasks])
        self.config = CycleConfig(priority_classes=setup.priority_classes)
        self.durations = {t.task_id: float(t.duration_s or 0.0) for j in jobs for t in j.spec.tasks}
        self.gpu_milli = {t.task_id: t.gpu_count * t.gpu_milli for j in jobs for t in j.spec.tasks}
        times = arrival_times(jobs, setup.rate_per_s, seed)
        self.live = {j.id: _Live(j, seq, at) for seq, (j, at) in enumerate(zip(jobs, times, strict=True))}
        self.events: list[tuple[float, int, int, str, str]] = [
            (at, ARRIVE, 0, j.id, "") for j, at in zip(jobs, times, strict=True)
        ]
        heapq.heapify(self.events)
        self.placer: FrameworkPlacer | None = None
        self.cycles = 0
        self.allocated = 0
        self.reasons: dict[str, PendingReason] = {}

    def run(self) -> WhatIfResult:
        times: list[float] = []
        alloc: list[float] = []
        qlen: list[int] = []
        capacity = self.setup.capacity_gpu_milli
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                self._apply(heapq.heappop(self.events))
            for _ in range(MAX_ROUNDS_PER_INSTANT):
                if not self._cycle(now):
                    break
            times.append(now)
            alloc.append(self.allocated / capacity * 100 if capacity else 0.0)
            qlen.append(sum(1 for j in self.live.values() if j.pending))
        return self._result(np.array(times, dtype=np.float64), np.array(alloc), np.array(qlen))

    def _apply(self, event: tuple[float, int, int, str, str]) -> None:
        _, kind, attempt, job_id, task_id = event
        job = self.live[job_id]
        if kind == ARRIVE:
            job.pending = tuple(t.task_id for t in job.job.spec.tasks)
        elif attempt == job.attempt and task_id in job.running:
            job.running.pop(task_id)
            self.allocated -= self.gpu_milli[task_id]

    def _cycle(self, now: float) -> bool:
        """One scheduling cycle; True when it preempted (the instant gets another round)."""
        pending = [j.workload(j.pending) for j in self.live.values() if j.pending]
        if not pending:
            return False
        running = [
            RunningWorkload(j.workload(tuple(j.running)), tuple(j.running.values()))
            for j in self.live.values()
            if j.running
        ]
        state = ClusterState(
            self.setup.nodes, self.setup.queues, tuple(running), tuple(pending), self.setup.network
        )
        self.placer = FrameworkPlacer(
            self.profile, self.typical, self.seed, self.cycles, self.placer, network=self.setup.network
        )
        result = schedule_cycle(state, self.placer, self.config)
        self.cycles += 1
        for admission in result.admissions:
            job = self.live[admission.job_id]
            for p in admission.placements:
                job.running[p.task_id] = p
                self.allocated += self.gpu_milli[p.task_id]
                end = now + self.durations[p.task_id]
                heapq.heappush(self.events, (end, LEAVE, job.attempt, job.job.id, p.task_id))
            placed = {p.task_id for p in admission.placements}
            job.pending = tuple(t for t in job.pending if t not in placed)
            if job.started_s is None:
                job.started_s = now
        victims = dict.fromkeys(v for p in result.preemptions for v in p.victims)
        for victim in victims:
            job = self.live[victim]
            self.allocated -= sum(self.gpu_milli[t] for t in job.running)
            job.running.clear()
            job.pending = tuple(t.task_id for t in job.job.spec.tasks)
            job.attempt += 1
            job.preempted += 1
        for waiting in result.pending:
            self.reasons[waiting.job_id] = waiting.reason
        return bool(victims)

    def _result(self, t: np.ndarray, a: np.ndarray, q: np.ndarray) -> WhatIfResult:
        span = np.diff(t, append=t[-1]) if t.size else np.empty(0)
        total = float(span.sum())
        mean_alloc = float((a * span).sum() / total) if total > 0 else (float(a.mean()) if a.size else 0.0)
        waiting = span * (q > 0)
        while_waiting = float(((100 - a) * waiting).sum() / waiting.sum()) if waiting.sum() > 0 else None
        outcomes = tuple(
            JobOutcome(
                j.job.id,
                j.job.spec.name,
                j.job.spec.queue,
                j.job.source,
                j.arrival_s,
                j.started_s,
                j.preempted,
                None
                if j.started_s is not None or j.job.id not in self.reasons
                else self.reasons[j.job.id].as_dict(),
            )
            for j in self.live.values()
        )
        delays = np.array([o.wait_s for o in outcomes if o.wait_s is not None], dtype=np.float64)
        never = sum(1 for o in outcomes if o.started_s is None)
        timeline = TimelineResult(self.policy, self.seed, t, a, q, delays, never, mean_alloc)
        return WhatIfResult(
            timeline, outcomes, self.setup.capacity_gpu_milli, 100 - mean_alloc, while_waiting, self.cycles
        )


def run_whatif(setup: WhatIfSetup, jobs: Sequence[WhatIfJob], policy: str, seed: int) -> WhatIfResult:
    """Replay ``jobs`` on ``setup`` under ``policy`` with ``seed`` (placement ties and drawn arrivals)."""
    return _Replay(setup, jobs, policy, seed).run()


def never_fits(setup: WhatIfSetup, job: WhatIfJob, policy: str) -> dict[str, Any] | None:
    """Why ``job`` cannot be placed even on the empty fleet with no quota in the way (then it never will),
    or None when it fits. Checked with the policy's own placer, before any replay."""
    open_queue = QueueSpec(DEFAULT_QUEUE)
    spec = replace(job.spec, queue=DEFAULT_QUEUE, priority_class="")
    workload = Workload(spec.domain_job(job.id), 0)
    state = ClusterState(setup.nodes, (open_queue,), (), (workload,), setup.network)
    placer = FrameworkPlacer(
        policy_profile(policy), workload_typical([t.request() for t in spec.tasks]), network=setup.network
    )
    result = schedule_cycle(state, placer, CycleConfig())
    if result.admissions:
        return None
    reason = result.reason(job.id)
    return reason.as_dict() if reason is not None else {"code": "NO_NODE_FITS", "message": "no node fits"}


def _stats(values: np.ndarray) -> dict[str, float]:
    if not values.size:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    return {
        "mean": float(values.mean()),
        "p50": float(np.percentile(values, 50)),
        "p95": float(np.percentile(values, 95)),
        "max": float(values.max()),
    }


def _run_summary(run: WhatIfResult) -> dict[str, Any]:
    placed = [o for o in run.jobs if o.started_s is not None]
    waits = np.array([o.wait_s for o in placed], dtype=np.float64)
    never = [o for o in run.jobs if o.started_s is None]
    return {
        "seed": run.seed,
        "jobs": len(run.jobs),
        "placed": len(placed),
        "waited": int((waits > 0).sum()),
        "never_placed": len(never),
        "preemptions": sum(o.preempted for o in run.jobs),
        "wait_s": _stats(waits),
        "mean_allocation_pct": run.timeline.mean_allocation_pct,
        "unallocated_pct": run.unallocated_pct,
        "unallocated_pct_while_waiting": run.unallocated_pct_while_waiting,
        "end_s": float(run.timeline.times[-1]) if run.timeline.times.size else 0.0,
        "cycles": run.cycles,
        "never_placed_jobs": [
            {"job": o.job_id, "name": o.name, "queue": o.queue, "source": o.source, "reason": o.reason}
            for o in never
        ],
        "allocation": {
            "time_s": [float(x) for x in run.timeline.times],
            "allocation_pct": [float(x) for x in run.timeline.allocation_pct],
            "queue_length": [int(x) for x in run.timeline.queue_length],
        },
    }


def summarise_whatif(
    workload: str, fleet: str, results: Sequence[WhatIfResult], policies: Sequence[str]
) -> dict[str, Any]:
    """The what-if `--json` contract (docs/simulate.md): per policy, the mean over seeds of the headline
    figures (waits pooled over seeds), and each seed's run: counts, wait statistics, unallocated GPU %,
    never-placed jobs with reasons, allocation and queue length over time."""
    out: dict[str, Any] = {}
    for policy in policies:
        runs = sorted((r for r in results if r.policy == policy), key=lambda r: r.seed)
        if not runs:
            continue
        per_seed = [_run_summary(r) for r in runs]
        waits = np.concatenate([r.timeline.delays for r in runs])
        waiting = [
            r.unallocated_pct_while_waiting for r in runs if r.unallocated_pct_while_waiting is not None
        ]
        out[policy] = {
            "placed": float(np.mean([s["placed"] for s in per_seed])),
            "waited": float(np.mean([s["waited"] for s in per_seed])),
            "never_placed": float(np.mean([s["never_placed"] for s in per_seed])),
            "wait_s": _stats(waits),
            "mean_allocation_pct": float(np.mean([r.timeline.mean_allocation_pct for r in runs])),
            "unallocated_pct": float(np.mean([r.unallocated_pct for r in runs])),
            "unallocated_pct_while_waiting": float(np.mean(waiting)) if waiting else None,
            "end_s": float(np.mean([s["end_s"] for s in per_seed])),
            "preemptions": float(np.mean([s["preemptions"] for s in per_seed])),
            "runs": per_seed,
        }
    capacity = results[0].capacity_gpu_milli if results else 0
    jobs = len(results[0].jobs) if results else 0
    return {
        "workload": workload,
        "mode": "whatif",
        "fleet": fleet,
        "gpus": capacity // GPU_MILLI,
        "jobs": jobs,
        "results": out,
    }


def write_jobs_csv(out: Path, workload: str, run: WhatIfResult) -> Path:
    """One row per job of one run: when it arrived and started, how long it waited, and for a job never
    placed, the reason code and message (beside the run's timeline CSV)."""
    path = out / f"{workload}_{run.policy}_seed{run.seed}_jobs.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["job", "name", "queue", "source", "arrival_s", "started_s", "wait_s", "preempted", "reason"]
        )
        for o in run.jobs:
            reason = "" if o.reason is None else f"{o.reason.get('code')}: {o.reason.get('message')}"
            started = "" if o.started_s is None else f"{o.started_s:.3f}"
            wait = "" if o.wait_s is None else f"{o.wait_s:.3f}"
            w.writerow(
                [
                    o.job_id,
                    o.name,
                    o.queue,
                    o.source,
                    f"{o.arrival_s:.3f}",
                    started,
                    wait,
                    o.preempted,
                    reason,
                ]
            )
    return path
