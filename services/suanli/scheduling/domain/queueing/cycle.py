"""One scheduling cycle: a pure function from a snapshot to admissions, preemptions, reservations and a
reason for every workload left pending. The numbered steps are described in docs/queues.md."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from suanli.scheduling.domain.model import GPU_MILLI, Job, Locality, TaskPlacement, TaskRequest
from suanli.scheduling.domain.queueing.ledger import Ledger, RunningBooks
from suanli.scheduling.domain.queueing.placer import GangPlacement, NoFit, Placer
from suanli.scheduling.domain.queueing.preemption import minimal_victims, victim_pools
from suanli.scheduling.domain.queueing.queues import QueueTree
from suanli.scheduling.domain.queueing.quota import check_quota, fair_share_key
from suanli.scheduling.domain.queueing.reasons import (
    BlockedByHigherPriority,
    GangIncomplete,
    Inadmissible,
    NetworkConstraint,
    NoNodeFits,
    NoRegionFits,
    PendingReason,
    QuotaExceeded,
    WaitingForPreemption,
)
from suanli.scheduling.domain.queueing.resources import (
    Amounts,
    gpu_flavour,
    job_demand,
    job_gpu_models_allowed,
    job_uses_gpu,
)
from suanli.scheduling.domain.queueing.state import ClusterState, CycleConfig, RunningWorkload, Workload
from suanli.scheduling.domain.queueing.structural import StructuralCheck


@dataclass(frozen=True, slots=True)
class Admission:
    job_id: str
    queue: str
    placements: tuple[TaskPlacement, ...]
    gpu_flavour: str | None = None  # the quota flavour charged; None when no queue governs the GPU model
    best_effort: bool = False


@dataclass(frozen=True, slots=True)
class Preemption:
    preemptor: str
    victims: tuple[str, ...]
    planned: tuple[TaskPlacement, ...]  # where the preemptor goes once the victims have stopped


@dataclass(frozen=True, slots=True)
class Reservation:
    job_id: str
    placements: tuple[TaskPlacement, ...]


@dataclass(frozen=True, slots=True)
class Pending:
    job_id: str
    queue: str
    reason: PendingReason


@dataclass(frozen=True, slots=True)
class QueueUsage:
    queue: str
    guaranteed: tuple[tuple[str, int], ...]
    best_effort: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class CycleResult:
    admissions: tuple[Admission, ...]
    preemptions: tuple[Preemption, ...]
    reservations: tuple[Reservation, ...]
    pending: tuple[Pending, ...]
    usage: tuple[QueueUsage, ...]  # after this cycle's decisions, preemptors counted as admitted

    @property
    def admitted(self) -> tuple[str, ...]:
        return tuple(a.job_id for a in self.admissions)

    def reason(self, job_id: str) -> PendingReason | None:
        return next((p.reason for p in self.pending if p.job_id == job_id), None)


def schedule_cycle(
    state: ClusterState, placer: Placer, config: CycleConfig | None = None, books: RunningBooks | None = None
) -> CycleResult:
    """`books`: what the running work held as the previous cycle counted it, carried by a caller that runs
    cycles one after another (brought up to date here); the result is the same without."""
    return _Cycle(state, placer, config or CycleConfig(), books).run()


# A placement attempt that passed quota but not placement: the job as restricted to a flavour, and why.
_Attempt = tuple[Job, NoFit]


class _Cycle:
    def __init__(
        self, state: ClusterState, placer: Placer, config: CycleConfig, books: RunningBooks | None = None
    ) -> None:
        self.state, self.placer, self.config = state, placer, config
        self.tree = QueueTree(state.queues)
        self.ledger = Ledger(self.tree, state.nodes, state.running, books)
        self.classes = {pc.name: pc.value for pc in config.priority_classes}
        self.admissions: list[Admission] = []
        self.preemptions: list[Preemption] = []
        self.reservations: list[Reservation] = []
        self.pending: list[Pending] = []
        self.queues_holding: set[str] = set()
        # Lowest priority of preemptible guaranteed work per queue and whether preemptible best-effort work
        # runs, over `ledger.running` (which only shrinks, by evictions): None until asked, reset on evict.
        self._victim_index: tuple[dict[str, int], bool] | None = None
        # Within a cycle room only shrinks (admissions, holds, reservations) until something is evicted, so
        # a job shape that did not fit will not fit later in the same cycle either: a backlog of look-alike
        # jobs costs one placement attempt per shape, not one per job. Cleared on eviction.
        self._no_fit: dict[_ShapeKey, NoFit] = {}
        self._reasons: dict[_ShapeKey, PendingReason] = {}
        self._structural = StructuralCheck(state.nodes, state.network)

    def run(self) -> CycleResult:
        guaranteed: dict[str, list[Workload]] = {}
        best_effort: dict[str, list[Workload]] = {}
        for workload in sorted(self.state.pending, key=lambda w: (w.seq, w.job.id)):
            # Structural before quota: a job no region can ever serve says so, not that its quota is short.
            problem = self._inadmissible(workload) or self._structural.reason(workload.job)
            if problem is not None:
                self._leave(workload, problem)
                continue
            lanes = best_effort if workload.job.best_effort else guaranteed
            lanes.setdefault(workload.job.queue, []).append(workload)
        self._drain(guaranteed, self._try_guaranteed)
        self._drain(best_effort, self._try_best_effort)
        return CycleResult(
            admissions=tuple(self.admissions),
            preemptions=tuple(self.preemptions),
            reservations=tuple(self.reservations),
            pending=tuple(self.pending),
            usage=tuple(
                QueueUsage(
                    name,
                    tuple(sorted(self.ledger.usage.get(name, {}).items())),
                    tuple(sorted(self.ledger.best_effort_usage.get(name, {}).items())),
                )
                for name in sorted(self.tree.names)
            ),
        )

    def _priority(self, workload: Workload) -> int:
        # A running workload whose class has since been deleted keeps ranking by its job's own priority.
        if workload.priority_class is None:
            return workload.job.priority
        return self.classes.get(workload.priority_class, workload.job.priority)

    def _drain(self, lanes: dict[str, list[Workload]], attempt: Callable[[Workload], None]) -> None:
        """Lowest fair-share key first, re-evaluated after every decision because each admission moves
        its queue's share; inside a queue, priority then submission order."""
        queues = {
            name: deque(sorted(items, key=lambda w: (-self._priority(w), w.seq, w.job.id)))
            for name, items in lanes.items()
        }
        while queues:
            name = min(queues, key=lambda q: (fair_share_key(self.tree, self.ledger.usage, q), q))
            attempt(queues[name].popleft())
            if not queues[name]:
                del queues[name]

    def _inadmissible(self, workload: Workload) -> Inadmissible | None:
        job = workload.job
        if job.queue not in self.tree:
            return Inadmissible(job.queue, "queue is unknown")
        if self.tree.stopped(job.queue):
            return Inadmissible(job.queue, "queue is stopped")
        if workload.priority_class is not None and workload.priority_class not in self.classes:
            return Inadmissible(job.queue, f"priority class {workload.priority_class} is unknown")
        if not self._gpu_models(workload):
            allowed = ", ".join(job_gpu_models_allowed(job) or ())
            return Inadmissible(job.queue, f"no quota for any requested GPU model ({allowed})")
        return None

    def _gpu_models(self, workload: Workload) -> tuple[str | None, ...]:
        """Flavour assignment: the GPU models to try, in the queue's declaration order. None means the
        placer may pick any model, which happens when no queue up the chain governs GPU models (or the
        work is best-effort and charges no quota)."""
        job = workload.job
        declared = self.tree.declared_gpu_models(job.queue)
        if job.best_effort or not job_uses_gpu(job) or not declared:
            return (None,)
        allowed = job_gpu_models_allowed(job)
        return tuple(m for m in declared if allowed is None or m in allowed)

    def _try_guaranteed(self, workload: Workload) -> None:
        job = workload.job
        shortfall: QuotaExceeded | None = None
        attempt: _Attempt | None = None
        for model in self._gpu_models(workload):
            restricted = _restrict(job, model)
            missing = check_quota(self.tree, self.ledger.usage, job.queue, job_demand(restricted, model))
            if missing is not None:
                shortfall = shortfall or missing
                continue
            outcome = self._place(restricted, GPU_MILLI)
            if isinstance(outcome, GangPlacement):
                self._admit(workload, model, outcome.placements)
                return
            attempt = attempt or (restricted, outcome)
        if self.config.preemption and self._preempt(workload):
            return
        if attempt is None:
            assert shortfall is not None  # every model was tried and none passed quota
            self._leave(workload, shortfall)
            return
        self._leave(workload, self._placement_reason(attempt, GPU_MILLI))
        if self.config.backfill and job.queue not in self.queues_holding:
            self._reserve(attempt[0])

    def _try_best_effort(self, workload: Workload) -> None:
        job = workload.job
        all_shared = all(t.request.is_shared_gpu for t in job.tasks if t.request.gpu_count)
        capacity = self.config.best_effort_gpu_capacity if job_uses_gpu(job) and all_shared else GPU_MILLI
        outcome = self._place(job, capacity)
        if isinstance(outcome, GangPlacement):
            self._admit(workload, None, outcome.placements)
        else:
            self._leave(workload, self._placement_reason((job, outcome), capacity))

    def _place(self, job: Job, capacity: int) -> GangPlacement | NoFit:
        key = _shape_key(job, capacity)
        known = self._no_fit.get(key)
        if known is not None:
            return known
        outcome = self.placer.place_gang(self.ledger.view(capacity), job)
        if isinstance(outcome, NoFit):
            self._no_fit[key] = outcome
        return outcome

    def _admit(self, workload: Workload, model: str | None, placements: tuple[TaskPlacement, ...]) -> None:
        job = workload.job
        self.ledger.occupy(job, placements)
        flavour = gpu_flavour(model) if model is not None else None
        self.admissions.append(Admission(job.id, job.queue, placements, flavour, job.best_effort))

    def _no_victims(self, workload: Workload) -> bool:
        """True when `victim_pools` is bound to come back empty for this workload: no cohorts (so nothing
        to reclaim), no preemptible best-effort work and nothing of lower priority in its queue. A cheap
        answer for the common case, so a backlog of jobs that do not fit does not scan every running
        workload once per pending job."""
        if self.tree.has_cohorts:
            return False
        if self._victim_index is None:
            lowest: dict[str, int] = {}
            best_effort = False
            for running in self.ledger.running.values():
                if not running.job.preemptible:
                    continue
                if running.job.best_effort:
                    best_effort = True
                    continue
                value = self._priority(running.workload)
                queue = running.job.queue
                lowest[queue] = min(value, lowest.get(queue, value))
            self._victim_index = (lowest, best_effort)
        lowest, best_effort = self._victim_index
        queue = workload.job.queue
        return not best_effort and (queue not in lowest or lowest[queue] >= self._priority(workload))

    def _preempt(self, workload: Workload) -> bool:
        job = workload.job
        if self._no_victims(workload):
            return False
        running = tuple(self.ledger.running.values())
        for model in self._gpu_models(workload):
            restricted = _restrict(job, model)
            demand = job_demand(restricted, model)

            def feasible(
                victims: tuple[RunningWorkload, ...], restricted: Job = restricted, demand: Amounts = demand
            ) -> GangPlacement | None:
                usage = self.ledger.usage_without(victims)
                if check_quota(self.tree, usage, job.queue, demand) is not None:
                    return None
                outcome = self.placer.place_gang(self.ledger.view(GPU_MILLI, released=victims), restricted)
                return outcome if isinstance(outcome, GangPlacement) else None

            pools = victim_pools(
                self.tree,
                self.ledger.usage,
                running,
                job.queue,
                self._priority(workload),
                demand,
                lambda w: self._priority(w.workload),
            )
            for pool in pools:
                found = minimal_victims(pool, feasible, self.config.victim_search_budget)
                if found is None:
                    continue
                victims, plan = found
                for victim in victims:
                    self.ledger.evict(victim)
                self._victim_index = None
                self._no_fit.clear()
                self._reasons.clear()
                self.ledger.hold(job, plan.placements)
                ids = tuple(v.job.id for v in victims)
                self.preemptions.append(Preemption(job.id, ids, plan.placements))
                self._leave(workload, WaitingForPreemption(ids))
                self.queues_holding.add(job.queue)
                return True
        return False

    def _placement_reason(self, attempt: _Attempt, capacity: int) -> PendingReason:
        restricted, nofit = attempt
        key = _shape_key(restricted, capacity)
        known = self._reasons.get(key)
        if known is not None:
            return known
        if self.ledger.has_reservations:
            unreserved = self.placer.place_gang(self.ledger.view(capacity, reservations=False), restricted)
            if isinstance(unreserved, GangPlacement):
                # Not remembered: a later admission may take this room, and the reason becomes NO_NODE_FITS.
                nodes = tuple(dict.fromkeys(p.node_id for p in unreserved.placements))
                return BlockedByHigherPriority(self.ledger.holders(nodes), nodes)
        reason: PendingReason
        first = restricted.tasks[0].request
        locality = restricted.placement_locality
        if nofit.network_excluded:
            reason = NetworkConstraint(first.data_region, first.max_rtt_ms, nofit.regions)
        elif (
            nofit.regions
            and restricted.gang_size >= 2
            and (len(nofit.regions) > 1 or locality not in (Locality.REGION, Locality.ANY))
        ):
            reason = NoRegionFits(restricted.gang_size, str(locality), nofit.regions)
        elif nofit.placed == 0:
            reason = NoNodeFits(len(self.state.nodes), nofit.rejections)
        else:
            reason = GangIncomplete(nofit.placed, nofit.required, nofit.rejections)
        self._reasons[key] = reason
        return reason

    def _reserve(self, restricted: Job) -> None:
        """Hold for the queue's first blocked job the room it would get once running work ends, so
        smaller jobs behind it can only backfill around it."""
        outcome = self.placer.place_gang(self.ledger.view(GPU_MILLI, future=True), restricted)
        if isinstance(outcome, GangPlacement):
            self.ledger.reserve(restricted, outcome.placements)
            self.reservations.append(Reservation(restricted.id, outcome.placements))
            self.queues_holding.add(restricted.queue)

    def _leave(self, workload: Workload, reason: PendingReason) -> None:
        self.pending.append(Pending(workload.job.id, workload.job.queue, reason))


# What a placement attempt depends on besides the room: the GPU capacity per device, the gang size, how
# close together it must run and every task's request (identities do not matter to whether something fits).
_ShapeKey = tuple[int, int, Locality, float | None, tuple[TaskRequest, ...]]


def _shape_key(job: Job, capacity: int) -> _ShapeKey:
    return (
        capacity,
        job.gang_size,
        job.placement_locality,
        job.min_bandwidth_gbps,
        tuple(t.request for t in job.tasks),
    )


def _restrict(job: Job, model: str | None) -> Job:
    """The job as placed under one GPU flavour: its GPU tasks may only land on that model."""
    if model is None:
        return job
    tasks = tuple(
        replace(t, request=replace(t.request, gpu_models=(model,))) if t.request.gpu_count else t
        for t in job.tasks
    )
    return replace(job, tasks=tasks)
