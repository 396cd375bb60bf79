"""Projection values -> gRPC messages (and page tokens)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.scheduling.domain.jobs import JobView, Phase, TaskRun, TaskRunState
from suanli.scheduling.domain.jobs.history import History
from suanli.scheduling.domain.queueing import QueueSpec
from suanli.scheduling.domain.queueing.resources import gpu_flavour
from suanli.scheduling.domain.queueing.start_estimate import StartEstimate
from suanli.scheduling.service_layer.capacity import NodeView
from suanli.scheduling.service_layer.errors import InvalidSpec
from suanli.scheduling.service_layer.projection import Projection

STATES = {
    Phase.PENDING: pb.JOB_STATE_PENDING,
    Phase.RUNNING: pb.JOB_STATE_RUNNING,
    Phase.SUCCEEDED: pb.JOB_STATE_SUCCEEDED,
    Phase.FAILED: pb.JOB_STATE_FAILED,
    Phase.CANCELLED: pb.JOB_STATE_CANCELLED,
}
KINDS = {"BATCH": pb.JOB_KIND_BATCH, "TRAINING": pb.JOB_KIND_TRAINING, "INFERENCE": pb.JOB_KIND_INFERENCE}
LOCALITIES = {
    "node": pb.LOCALITY_NODE,
    "fabric": pb.LOCALITY_FABRIC,
    "zone": pb.LOCALITY_ZONE,
    "region": pb.LOCALITY_REGION,
    "any": pb.LOCALITY_ANY,
}


def start_estimate(out: pb.Job, estimate: StartEstimate | None) -> None:
    """A waiting job's queue position and estimated start, into its message (unset: not waiting)."""
    if estimate is None:
        return
    out.queue_position, out.queue_waiting = estimate.position, estimate.waiting
    if estimate.start_at is not None:
        out.estimated_start_at.CopyFrom(timestamp(estimate.start_at))
    out.estimated_start_note = estimate.note


def timestamp(at: datetime | None) -> Timestamp:
    ts = Timestamp()
    if at is not None:
        ts.FromDatetime(at)
    return ts


def pending_reason(reason: Mapping[str, Any] | None) -> pb.PendingReason | None:
    if not reason:
        return None
    details = {
        k: json.dumps(v) if not isinstance(v, str) else v
        for k, v in reason.items()
        if k not in ("code", "message")
    }
    return pb.PendingReason(code=str(reason["code"]), message=str(reason["message"]), details=details)


def region_verdicts(reason: Mapping[str, Any] | None) -> list[pb.RegionVerdict]:
    """The per-region detail of a NETWORK_CONSTRAINT, NO_REGION_FITS or UNSCHEDULABLE reason (none for
    other codes)."""
    regions = (reason or {}).get("regions") or ()
    return [
        pb.RegionVerdict(region=str(r["region"]), verdict=str(r["verdict"]))
        for r in regions
        if isinstance(r, Mapping)
    ]


def _task_state(job: JobView, task: TaskRun) -> str:
    """A task's state as answers show it: a task of a cancelled job that was never placed (or whose
    attempt had ended when it was requeued) is CANCELLED, not PENDING: nothing will place it now."""
    if job.phase is Phase.CANCELLED and task.state is TaskRunState.PENDING:
        return "CANCELLED"
    return task.state.value


def job_message(job: JobView, reason: Mapping[str, Any] | None) -> pb.Job:
    s = job.spec
    spec = pb.JobSpec(
        name=s.name,
        queue=s.queue,
        kind=KINDS.get(s.kind, pb.JOB_KIND_BATCH),
        priority_class=s.priority_class,
        preemptible=s.preemptible,
        best_effort=s.best_effort,
        min_available=s.min_available,
        max_retries=s.max_retries,
        labels=dict(s.labels),
        data_region=s.data_region,
        max_rtt_ms=s.max_rtt_ms,
        locality=LOCALITIES.get(s.locality, pb.LOCALITY_UNSPECIFIED),
        min_bandwidth_gbps=s.min_bandwidth_gbps,
        tasks=[
            pb.TaskSpec(
                name=t.name,
                resources=pb.ResourceRequest(
                    cpu_milli=t.cpu_milli,
                    memory_mib=t.memory_mib,
                    gpu_count=t.gpu_count,
                    gpu_milli=t.gpu_milli,
                    gpu_models=list(t.gpu_models),
                    node_selector=dict(t.node_selector),
                    regions=list(t.regions),
                    gpu_memory_mib=t.gpu_memory_mib,
                ),
                command=t.argv[0] if t.argv else "",
                args=list(t.argv[1:]),
                env=dict(t.env),
                duration_s=t.duration_s or 0.0,
                replicas=1,
            )
            for t in s.tasks
        ],
    )
    tasks = [
        pb.TaskStatus(
            task_id=t.task_id,
            state=_task_state(job, t),
            node_id=t.node_id,
            gpu_indices=list(t.gpu_indices),
            gpu_milli=list(t.gpu_milli),
            attempt=t.attempt,
            exit_code=t.exit_code,
            reason=t.reason,
            region=t.region if t.node_id else "",
            rtt_ms=t.rtt_ms if t.node_id else None,
            price_per_hour=t.price_per_hour if t.node_id else None,
        )
        for t in job.tasks
    ]
    active = job.active
    prices = [t.price_per_hour for t in active]
    out = pb.Job(
        id=job.id,
        spec=spec,
        state=STATES[job.phase],
        tasks=tasks,
        restarts=job.restarts,
        submitted_at=timestamp(job.submitted_at),
        updated_at=timestamp(job.updated_at),
        regions=sorted({t.region for t in active if t.region}),
        price_per_hour=sum(p for p in prices if p is not None) if prices and None not in prices else None,
    )
    message = pending_reason(reason) if job.phase is Phase.PENDING else None
    if message is not None:
        out.pending_reason.CopyFrom(message)
    return out


def description_message(job: pb.Job, history: History, as_of: datetime) -> pb.JobDescription:
    """DescribeJob's answer: the job as GetJob gives it, with its history as of `as_of`."""
    acct = history.accounting
    return pb.JobDescription(
        job=job,
        events=[
            pb.HistoryEvent(
                at=timestamp(e.at),
                type=e.type,
                message=e.message,
                task_id=e.task_id,
                attempt=e.attempt,
                node_id=e.node_id,
                by=e.by,
                reason=e.reason,
                exit_code=e.exit_code,
            )
            for e in history.entries
        ],
        attempts=[
            pb.TaskAttempt(
                task_id=a.task_id,
                attempt=a.attempt,
                node_id=a.node_id,
                region=a.region,
                gpu_indices=list(a.gpu_indices),
                gpu_milli=list(a.gpu_milli),
                placed_at=timestamp(a.placed_at),
                started_at=timestamp(a.started_at) if a.started_at else None,
                ended_at=timestamp(a.ended_at) if a.ended_at else None,
                outcome=a.outcome,
                exit_code=a.exit_code,
                reason=a.reason,
                running_s=a.running_s(as_of),
                gpu_hours=a.gpu_hours(as_of),
                price_per_hour=a.price_per_hour,
            )
            for a in history.attempts
        ],
        accounting=pb.JobAccounting(
            attempts=acct.attempts,
            wait_s=acct.wait_s,
            elapsed_s=acct.elapsed_s,
            gpu_hours=acct.gpu_hours,
            cpu_hours=acct.cpu_hours,
            cost=acct.cost,
        ),
        as_of=timestamp(as_of),
    )


def node_message(view: NodeView, used: Mapping[str, tuple[int, int, dict[int, int]]]) -> pb.Node:
    cpu, memory, gpus = used.get(view.id, (0, 0, {}))
    return pb.Node(
        id=view.id,
        region=view.region,
        zone=view.zone,
        status=view.status,
        cpu_milli=view.cpu_milli,
        free_cpu_milli=max(0, view.cpu_milli - cpu),
        memory_mib=view.memory_mib,
        free_memory_mib=max(0, view.memory_mib - memory),
        labels=dict(view.labels),
        devices=[
            pb.Device(index=d.index, model=d.model, free_milli=max(0, 1000 - gpus.get(d.index, 0)))
            for d in view.devices
        ],
    )


def node_usage(projection: Projection) -> dict[str, tuple[int, int, dict[int, int]]]:
    """Per node: CPU, memory and milli per device held by active tasks (what the scheduler allocated)."""
    out: dict[str, tuple[int, int, dict[int, int]]] = {}
    # Every job with an active task is live: finished history is not walked.
    for job in projection.live.values():
        for t in job.active:
            cpu, memory, gpus = out.get(t.node_id, (0, 0, {}))
            for index, milli in zip(t.gpu_indices, t.gpu_milli, strict=True):
                gpus[index] = gpus.get(index, 0) + milli
            out[t.node_id] = (cpu + t.spec.cpu_milli, memory + t.spec.memory_mib, gpus)
    return out


def queue_spec_message(spec: QueueSpec) -> pb.QueueSpec:
    """A queue's spec as CreateQueue / UpdateQueue take it."""
    return pb.QueueSpec(
        name=spec.name,
        cohort=spec.cohort or "",
        stopped=spec.stopped,
        quotas=[
            pb.QuotaSpec(
                flavour=q.resource,
                guaranteed=q.guaranteed,
                maximum=q.maximum,
                borrowing_limit=q.borrowing_limit,
                lending_limit=q.lending_limit,
            )
            for q in spec.quotas
        ],
    )


def spec_of_queue(queue: pb.Queue) -> pb.QueueSpec:
    """The spec a Queue answer was made from (to change one field of it and send it back)."""

    def limit(r: pb.ResourceAmount, name: str) -> int | None:
        return int(getattr(r, name)) if r.HasField(name) else None

    return pb.QueueSpec(
        name=queue.name,
        cohort=queue.cohort,
        stopped=queue.stopped,
        quotas=[
            pb.QuotaSpec(
                flavour=r.flavour,
                guaranteed=r.guaranteed,
                maximum=limit(r, "maximum"),
                borrowing_limit=limit(r, "borrowing_limit"),
                lending_limit=limit(r, "lending_limit"),
            )
            for r in queue.resources
        ],
    )


def queue_messages(
    specs: Sequence[QueueSpec], projection: Projection, models: Mapping[str, str]
) -> list[pb.Queue]:
    """`models`: node id -> GPU model, to charge GPU use to its flavour. One walk over the live jobs for
    all of `specs` (a queue counts the jobs of the queues below it too); finished jobs count nowhere."""
    by_queue: dict[str, list[JobView]] = {}
    for job in projection.live.values():
        if not job.phase.final:
            by_queue.setdefault(job.spec.queue, []).append(job)
    out = []
    for spec in specs:
        prefix = spec.name + "/"
        jobs = [j for q, js in by_queue.items() if q == spec.name or q.startswith(prefix) for j in js]
        out.append(_queue_message(spec, jobs, models))
    return out


def queue_message(spec: QueueSpec, projection: Projection, models: Mapping[str, str]) -> pb.Queue:
    return queue_messages((spec,), projection, models)[0]


def _queue_message(spec: QueueSpec, jobs: Iterable[JobView], models: Mapping[str, str]) -> pb.Queue:
    used: dict[str, int] = {}
    pending = running = 0
    for job in jobs:
        if job.waiting:
            pending += 1
        elif job.active:
            running += 1
        if job.spec.best_effort:
            continue
        for t in job.active:
            used["cpu"] = used.get("cpu", 0) + t.spec.cpu_milli
            used["memory"] = used.get("memory", 0) + t.spec.memory_mib
            if t.gpu_milli and t.node_id in models:
                flavour = gpu_flavour(models[t.node_id])
                used[flavour] = used.get(flavour, 0) + sum(t.gpu_milli)
    resources = []
    share = 0.0
    for q in spec.quotas:
        amount = used.get(q.resource, 0)
        resources.append(
            pb.ResourceAmount(
                flavour=q.resource,
                guaranteed=q.guaranteed,
                maximum=q.maximum,
                used=amount,
                borrowed=max(0, amount - q.guaranteed),
                borrowing_limit=q.borrowing_limit,
                lending_limit=q.lending_limit,
            )
        )
        if q.guaranteed:
            share = max(share, amount / q.guaranteed)
    return pb.Queue(
        name=spec.name,
        cohort=spec.cohort or "",
        resources=resources,
        pending_jobs=pending,
        running_jobs=running,
        dominant_share=share,
        stopped=spec.stopped,
    )


def encode_token(filters: Mapping[str, Any], after: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps({"f": dict(filters), "a": after}).encode()).decode()


def decode_token(token: str, filters: Mapping[str, Any]) -> Any:
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        after, given = data["a"], data["f"]
    except (ValueError, KeyError, TypeError):
        raise InvalidSpec("page_token", "is not a token this server issued") from None
    if given != dict(filters):
        raise InvalidSpec("page_token", "was issued for other filters; repeat the first request's filters")
    return after


MAX_PAGE_SIZE = 500


def page_size(value: int, default: int = 50) -> int:
    if not 0 <= value <= MAX_PAGE_SIZE:
        raise InvalidSpec("page_size", f"must be 0..{MAX_PAGE_SIZE} (0 means {default})")
    return value or default
