"""One scheduling cycle of the service: snapshot -> `schedule_cycle` -> events per job.

Pure: the projection (what PostgreSQL holds) and the capacity view go in; TaskPlaced / TaskPreempted
decisions per job (typed events) and a pending reason per waiting job come out. Room in use is exactly
what the jobs' active tasks hold, never what the capacity stream says is free.

A job larger than the wave size is offered to the cycle a wave at a time (`domain.jobs.waves`): its
started tasks hold room as running work, its next wave is pending work of its own, and while the
previous wave has not started the job waits with the reason WAITING_FOR_WAVE. A job requeued from a
lost node waits with WAITING_FOR_LOST_ATTEMPT until its lost attempts are known ended
(`domain.jobs.lost_attempts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from suanli.scheduling.domain.jobs import (
    DEFAULT_LOST_FENCE,
    DEFAULT_WAVE_SIZE,
    DeviceShare,
    JobEvent,
    JobView,
    PlacedRequests,
    TaskPlaced,
    TaskPreempted,
    TaskRunState,
    next_wave,
    outstanding,
    task_env,
    waiting_reason,
)
from suanli.scheduling.domain.model import Node, TaskPlacement
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    CycleResult,
    Placer,
    RunningBooks,
    RunningWorkload,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.service_layer.projection import Projection


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    result: CycleResult
    decisions: dict[str, list[JobEvent]] = field(default_factory=dict)  # job id -> events
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # job id -> reason (as_dict)


def wants_room(job: JobView, wave_size: int = DEFAULT_WAVE_SIZE) -> bool:
    """Whether the cycle has something to place for the job: it waits whole, or its next wave is ready."""
    if job.waiting:
        return True
    wave = next_wave(job, wave_size)
    return wave is not None and bool(wave.task_ids)


# A job's view for the queueing core, per (job id, version, tasks it covers). A job's spec never changes and
# its version moves with every event, so an entry never goes stale.
_Key = tuple[str, int, tuple[str, ...] | None]


@dataclass
class CycleMemo:
    """What a cycle built that the next one may reuse, carried by the service from cycle to cycle: the
    jobs' views for the queueing core, the running workloads (reused as the very same objects while a
    job and the fleet are unchanged, which is what lets `books` count only what changed) and the running
    work's books. Entries of jobs no longer live are dropped each cycle. Decisions are the same without
    it; it saves rebuilding every live job's view and summing every running job's room each cycle."""

    workloads: dict[_Key, Workload] = field(default_factory=dict)
    running: dict[_Key, RunningWorkload] = field(default_factory=dict)
    nodes: tuple[Node, ...] | None = None  # the fleet `running` was built against
    known: dict[str, frozenset[int]] = field(default_factory=dict)  # its device indices per node
    books: RunningBooks = field(default_factory=RunningBooks)


def cluster_state(
    projection: Projection,
    nodes: tuple[Node, ...],
    memo: CycleMemo | None = None,
    network: NetworkSnapshot = EMPTY_NETWORK,
    wave_size: int = DEFAULT_WAVE_SIZE,
    held: dict[str, dict[str, Any]] | None = None,
    now: datetime | None = None,
    lost_fence: timedelta = DEFAULT_LOST_FENCE,
) -> ClusterState:
    """`held` (filled in when given): job id -> pending reason of each job waiting for its last wave or
    for its lost attempts; `now`: the time lost attempts are judged at (None: none is waited for)."""
    memo = memo if memo is not None else CycleMemo()
    if memo.nodes is not nodes:
        memo.known = {n.id: frozenset(d.index for d in n.gpus) for n in nodes}
    known = memo.known
    running: list[RunningWorkload] = []
    pending: list[Workload] = []
    previous = memo.workloads
    # A running workload's placements leave out devices the fleet does not know: reused for the same fleet.
    previous_running = memo.running if memo.nodes is nodes else {}
    used: dict[_Key, Workload] = {}
    used_running: dict[_Key, RunningWorkload] = {}

    def workload(job: JobView, task_ids: tuple[str, ...] | None = None) -> Workload:
        key = (job.id, job.version, task_ids)
        found = previous.get(key) or _workload(job, task_ids)
        used[key] = found
        return found

    for job in sorted(projection.live.values(), key=lambda j: j.seq):  # final jobs hold nothing
        wave = next_wave(job, wave_size)
        lost = () if now is None or not job.lost_attempts else outstanding(job.lost_attempts, now, lost_fence)
        if lost and (job.waiting or (wave is not None and wave.task_ids)):
            if held is not None:
                held[job.id] = waiting_reason(lost, lost_fence)
        elif wave is not None and wave.task_ids:
            pending.append(workload(job, wave.task_ids))
        elif wave is not None and held is not None:
            held[job.id] = wave.reason()
        elif job.waiting:
            pending.append(workload(job))
        active = job.active
        if active:
            ids = tuple(t.task_id for t in active)
            key = (job.id, job.version, ids)
            found = previous_running.get(key)
            if found is None:
                placements = tuple(
                    t.placement()
                    for t in active
                    if t.node_id in known and set(t.gpu_indices) <= known[t.node_id]
                )
                found = RunningWorkload(workload(job, ids), placements, stopping=job.winding_down)
            else:
                used[key] = found.workload
            used_running[key] = found
            running.append(found)
    memo.workloads, memo.running, memo.nodes = used, used_running, nodes
    return ClusterState(nodes, tuple(projection.queues.values()), tuple(running), tuple(pending), network)


def _workload(job: JobView, task_ids: tuple[str, ...] | None = None) -> Workload:
    return Workload(job.spec.domain_job(job.id, task_ids), job.seq, job.spec.priority_class or None)


def run_cycle(
    projection: Projection,
    nodes: tuple[Node, ...],
    placer: Placer,
    config: CycleConfig,
    cycle: int,
    regions: Mapping[str, tuple[str, str]],
    memo: CycleMemo | None = None,
    network: NetworkSnapshot = EMPTY_NETWORK,
    wave_size: int = DEFAULT_WAVE_SIZE,
    now: datetime | None = None,
    lost_fence: timedelta = DEFAULT_LOST_FENCE,
) -> CycleOutcome:
    """`regions`: node id -> (region, site), written into each placement for the agent and billing;
    `memo`: what the previous cycle built, reused where a job has not changed (updated in place);
    `network`: the network view the placer was given too (it decides which jobs no region can serve);
    `wave_size`: the most tasks of one job placed at once (0: no waves); `now` and `lost_fence`: how
    lost attempts are waited for (see `cluster_state`)."""
    held: dict[str, dict[str, Any]] = {}
    state = cluster_state(projection, nodes, memo, network, wave_size, held, now, lost_fence)
    result = schedule_cycle(state, placer, config, memo.books if memo is not None else None)
    decisions: dict[str, list[JobEvent]] = {}
    for admission in result.admissions:
        job = projection.jobs[admission.job_id]
        decisions[job.id] = [placed(job, p, cycle, regions) for p in admission.placements]
        wave = next_wave(job, wave_size)
        if wave is not None:
            left = sum(1 for t in job.tasks if t.state is TaskRunState.PENDING) - len(admission.placements)
            if left > 0:  # the rest waits for this wave to start
                held[job.id] = replace(wave, placed=wave.placed + len(admission.placements)).reason()
    victims = dict.fromkeys(v for p in result.preemptions for v in p.victims)
    preemptor = {v: p.preemptor for p in result.preemptions for v in p.victims}
    for victim in victims:
        job = projection.jobs[victim]
        decisions[victim] = [
            TaskPreempted(
                job.id,
                t.task_id,
                t.node_id,
                t.attempt,
                f"preempted by {preemptor[victim]}",
                preemptor_job_id=preemptor[victim],
            )
            for t in job.active
            if t.state in (TaskRunState.PLACED, TaskRunState.RUNNING)
        ]
    pending = {**held, **{p.job_id: p.reason.as_dict() for p in result.pending}}
    return CycleOutcome(result, {k: v for k, v in decisions.items() if v}, pending)


def placed(job: JobView, p: TaskPlacement, cycle: int, regions: Mapping[str, tuple[str, str]]) -> TaskPlaced:
    task = job.task(p.task_id)
    assert task is not None
    spec = task.spec
    region, site = regions.get(p.node_id, ("default", ""))
    return TaskPlaced(
        job_id=job.id,
        task_id=spec.task_id,
        node_id=p.node_id,
        region=region,
        site=site,
        devices=tuple(DeviceShare(i, m) for i, m in zip(p.gpu_indices, p.gpu_milli, strict=True)),
        requests=PlacedRequests(
            cpu_milli=spec.cpu_milli,
            memory_mib=spec.memory_mib,
            gpu_count=spec.gpu_count,
            gpu_milli=spec.gpu_milli or 1000,
            gpu_memory_mib=spec.gpu_memory_mib,
            gpu_model=spec.gpu_models[0] if len(spec.gpu_models) == 1 else None,
        ),
        attempt=job.attempt,
        cycle=cycle,
        command=spec.argv,
        env=tuple(task_env(spec).items()),
        duration_s=spec.duration_s,
        queue=job.spec.queue,
        tenant=job.spec.tenant,
        best_effort=job.spec.best_effort,
        rtt_ms=p.rtt_ms,
        price_per_hour=p.price_per_hour,
    )
