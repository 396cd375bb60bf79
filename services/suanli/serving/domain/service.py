"""A service and its replicas as one aggregate: each decision answers events and orders to the scheduler.

Pure: ids, times and the replica policy are passed in. A replica is one single-task inference job of
the scheduler; the aggregate knows it by the command's request id until the scheduler names its job,
then by the job id. The events are the service's history (`services.events`); the orders are commands
of the scheduler's command topic (`jobs.commands`), written with the events in one transaction.

Replica states, and what moves them:

    requested --job id known--> pending --TaskPlaced--> placed --TaskStarted--> running
    pending/placed --JobRequeued--> pending (the scheduler places it again; ReplicaStopped final=false)
    any --job failed, finished, cancelled elsewhere, refused--> gone (ReplicaStopped final=true), replaced
    any --scale down, delete--> releasing (no job id yet: cancelled when it is known) or gone
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from suanli.contracts.replica_env import MAX_BATCH_ENV, MODEL_ENV, REPLICA_ENV, SERVICE_ENV, SERVICE_ID_ENV
from suanli.errors import FailedPrecondition, InvalidArgument
from suanli.jobspec.ids import job_id_of_request
from suanli.serving.domain.spec import ServiceSpec

# Why a service's replica count changed (ServiceScaled.reason).
CREATED, MANUAL, AUTOSCALER, REPLICA_REPLACED = "created", "manual", "autoscaler", "replica-replaced"
# The live autoscaler's reasons name its policy: `autoscaler:kpa`, `autoscaler:slo`.
SCALE_REASONS = (CREATED, MANUAL, f"{AUTOSCALER}:kpa", f"{AUTOSCALER}:slo", REPLICA_REPLACED)
REQUEST_PREFIX = "serving-"
# Job names are at most 63 characters: a service name of up to 63 keeps its first 50 and the replica number.
_JOB_NAME_STEM = 50


class ReplicaState(StrEnum):
    REQUESTED = "requested"
    PENDING = "pending"
    PLACED = "placed"
    RUNNING = "running"
    RELEASING = "releasing"


class ServiceState(StrEnum):
    ACTIVE = "active"
    DELETED = "deleted"


class ReplicasOutOfRange(InvalidArgument):
    """A replica count outside the spec's min_replicas..max_replicas (INVALID_ARGUMENT, field `replicas`)."""

    def __init__(self, wanted: int, spec: ServiceSpec) -> None:
        super().__init__(
            f"replicas: {wanted} is outside min_replicas..max_replicas "
            f"({spec.min_replicas}..{spec.max_replicas})"
        )


class ServiceDeletedError(FailedPrecondition):
    def __init__(self, name: str) -> None:
        super().__init__(f"service {name!r} is being deleted")


@dataclass(frozen=True, slots=True)
class ReplicaPolicy:
    """Priority classes of replica jobs: guaranteed ones (the first min_replicas) are never preempted."""

    guaranteed_class: str = "serving"
    surge_class: str = "serving"


# Events: the service's history, one dataclass per Avro schema of schemas/avro/serving.
@dataclass(frozen=True, slots=True)
class ServiceCreated:
    service_id: str
    tenant: str
    queue: str
    name: str
    model: str
    spec: str  # the spec document as JSON text
    principal: str


@dataclass(frozen=True, slots=True)
class ServiceScaled:
    service_id: str
    from_replicas: int
    to_replicas: int
    reason: str
    replica_id: str = ""  # the replaced replica (reason replica-replaced)
    principal: str = ""


@dataclass(frozen=True, slots=True)
class ServiceDeleted:
    service_id: str
    principal: str


@dataclass(frozen=True, slots=True)
class ReplicaRequested:
    service_id: str
    replica_id: str
    request_id: str
    seq: int
    guaranteed: bool
    region: str  # the region it is pinned to for spread ("" = any allowed region)
    job_spec: str  # the job spec sent to the scheduler, JSON text


@dataclass(frozen=True, slots=True)
class ReplicaSubmitted:
    service_id: str
    replica_id: str
    job_id: str


@dataclass(frozen=True, slots=True)
class ReplicaPlaced:
    service_id: str
    replica_id: str
    job_id: str
    node_id: str
    region: str
    site: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ReplicaStarted:
    service_id: str
    replica_id: str
    job_id: str
    node_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class ReplicaStopped:
    service_id: str
    replica_id: str
    job_id: str
    cause: str  # failed | finished | cancelled | refused | requeued
    reason: str
    final: bool  # the job is over (the replica is replaced); False: the scheduler places it again
    attempt: int = 0  # requeued: the job's new attempt (placements of older ones are void)


@dataclass(frozen=True, slots=True)
class ReplicaReleased:
    service_id: str
    replica_id: str
    job_id: str
    reason: str  # scale-down | deleted


Event = (
    ServiceCreated
    | ServiceScaled
    | ServiceDeleted
    | ReplicaRequested
    | ReplicaSubmitted
    | ReplicaPlaced
    | ReplicaStarted
    | ReplicaStopped
    | ReplicaReleased
)


# Orders to the scheduler (its command topic), keyed by request id.
@dataclass(frozen=True, slots=True)
class SubmitReplica:
    request_id: str
    tenant: str
    spec: str


@dataclass(frozen=True, slots=True)
class CancelReplica:
    request_id: str
    tenant: str
    job_id: str
    reason: str


Order = SubmitReplica | CancelReplica


@dataclass(frozen=True, slots=True)
class Decision:
    events: tuple[Event, ...] = ()
    orders: tuple[Order, ...] = ()

    def __add__(self, other: Decision) -> Decision:
        return Decision(self.events + other.events, self.orders + other.orders)


@dataclass(frozen=True, slots=True)
class Replica:
    replica_id: str
    request_id: str
    seq: int
    guaranteed: bool
    region: str
    state: ReplicaState = ReplicaState.REQUESTED
    job_id: str = ""
    node_id: str = ""
    placed_region: str = ""
    site: str = ""
    attempt: int = 0

    @property
    def serving(self) -> bool:
        """Counts toward the service's replicas (a releasing one no longer does)."""
        return self.state is not ReplicaState.RELEASING


@dataclass(slots=True)
class Service:
    """The aggregate. Build it with `Service.created(...)` or from its stored fields; never mutate fields
    directly: every change is an event passed to `apply`."""

    service_id: str
    tenant: str
    queue: str
    name: str
    document: dict[str, Any]
    spec: ServiceSpec
    desired: int = 0
    state: ServiceState = ServiceState.ACTIVE
    next_seq: int = 1
    replicas: dict[str, Replica] = field(default_factory=dict)
    version: int = 0  # events recorded so far (the stream's version)

    @classmethod
    def create(
        cls,
        service_id: str,
        tenant: str,
        queue: str,
        document: Mapping[str, Any],
        spec: ServiceSpec,
        replicas: int,
        principal: str,
        policy: ReplicaPolicy,
    ) -> tuple[Service, Decision]:
        """A new service and its first replicas (`replicas`, or min_replicas when 0)."""
        count = replicas or spec.min_replicas
        if not spec.min_replicas <= count <= spec.max_replicas:
            raise ReplicasOutOfRange(count, spec)
        doc = {k: v for k, v in document.items() if k != "queue"}
        service = cls(service_id, tenant, queue, spec.name, doc, spec)
        created = ServiceCreated(
            service_id, tenant, queue, spec.name, spec.model, json.dumps(doc, sort_keys=True), principal
        )
        decision = service._record(Decision((created,)))
        return service, decision + service._scale(count, CREATED, principal, policy)

    # --- decisions -------------------------------------------------------------------------------------

    def scale(self, to: int, reason: str, principal: str, policy: ReplicaPolicy) -> Decision:
        self._active()
        if not self.spec.min_replicas <= to <= self.spec.max_replicas:
            raise ReplicasOutOfRange(to, self.spec)
        if to == self.desired and len(self.serving_replicas) == to:
            return Decision()
        # The same count again still asks for replicas the scheduler refused before.
        return self._scale(to, reason, principal, policy)

    def delete(self, principal: str) -> Decision:
        if self.state is ServiceState.DELETED:
            return Decision()
        decision = self._record(Decision((ServiceDeleted(self.service_id, principal),)))
        for replica in sorted(self.replicas.values(), key=lambda r: r.seq):
            decision += self._release(replica, "deleted")
        return decision

    def job_known(self, request_id: str, job_id: str) -> Decision:
        """The scheduler accepted the replica's job (its reply, or JobSubmitted naming the request)."""
        replica = self._by_request(request_id)
        if replica is None or replica.job_id:
            return Decision()
        decision = self._record(Decision((ReplicaSubmitted(self.service_id, replica.replica_id, job_id),)))
        if replica.state is ReplicaState.RELEASING:
            # Released before its job had an id: cancel it now, and it is gone.
            order = CancelReplica(_cancel_id(replica.request_id), self.tenant, job_id, "replica released")
            done = ReplicaReleased(self.service_id, replica.replica_id, job_id, "released")
            decision += self._record(Decision((done,), (order,)))
        return decision

    def job_refused(self, request_id: str, code: str, message: str) -> Decision:
        """The scheduler refused the replica's job: the replica is gone, and not replaced (it would be
        refused again); the next scale asks again."""
        replica = self._by_request(request_id)
        if replica is None or replica.job_id:
            return Decision()
        lost = ReplicaStopped(self.service_id, replica.replica_id, "", "refused", f"{code}: {message}", True)
        return self._record(Decision((lost,)))

    def placed(
        self, replica_id: str, job_id: str, node_id: str, region: str, site: str, attempt: int
    ) -> Decision:
        replica = self.replicas.get(replica_id)
        if replica is None or replica.state is ReplicaState.RELEASING or attempt < replica.attempt:
            return Decision()
        if replica.state in _ON_NODE and (replica.attempt, replica.node_id, replica.site) == (
            attempt,
            node_id,
            site,
        ):
            return Decision()  # a redelivered placement
        decision = Decision()
        if not replica.job_id:
            decision += self._record(Decision((ReplicaSubmitted(self.service_id, replica_id, job_id),)))
        if replica.state in _ON_NODE and attempt > replica.attempt:
            # A newer attempt read before the JobRequeued that made it: the older one was lost all the same.
            lost = ReplicaStopped(
                self.service_id,
                replica_id,
                job_id,
                "requeued",
                f"placed again as attempt {attempt}",
                False,
                attempt,
            )
            decision += self._record(Decision((lost,)))
        event = ReplicaPlaced(self.service_id, replica_id, job_id, node_id, region, site, attempt)
        return decision + self._record(Decision((event,)))

    def started(self, job_id: str, node_id: str, attempt: int) -> Decision:
        """The replica's task started on its node (the agent's TaskStarted)."""
        replica = self._by_job(job_id)
        if replica is None or replica.state in (ReplicaState.RELEASING, ReplicaState.RUNNING):
            return Decision()
        if attempt < replica.attempt:
            return Decision()
        event = ReplicaStarted(self.service_id, replica.replica_id, job_id, node_id, attempt)
        return self._record(Decision((event,)))

    def job_requeued(self, job_id: str, attempt: int, reason: str) -> Decision:
        """The scheduler requeued the job as `attempt` (JobRequeued carries the new attempt number)."""
        replica = self._by_job(job_id)
        if replica is None or replica.state is ReplicaState.RELEASING or attempt <= replica.attempt:
            return Decision()
        lost = ReplicaStopped(self.service_id, replica.replica_id, job_id, "requeued", reason, False, attempt)
        return self._record(Decision((lost,)))

    def job_ended(self, job_id: str, cause: str, reason: str, policy: ReplicaPolicy) -> Decision:
        """The replica's job is over (failed, finished or cancelled by someone else): replace it."""
        replica = self._by_job(job_id)
        if replica is None:
            return Decision()
        lost = ReplicaStopped(self.service_id, replica.replica_id, job_id, cause, reason, True)
        decision = self._record(Decision((lost,)))
        if self.state is ServiceState.ACTIVE and replica.serving:
            scaled = ServiceScaled(
                self.service_id, self.desired, self.desired, REPLICA_REPLACED, replica.replica_id
            )
            decision += self._record(Decision((scaled,)))
            decision += self._add(1, policy)
        return decision

    # --- reading ---------------------------------------------------------------------------------------

    @property
    def serving_replicas(self) -> list[Replica]:
        return sorted((r for r in self.replicas.values() if r.serving), key=lambda r: r.seq)

    @property
    def ready(self) -> int:
        """Replicas placed on a node (started or not)."""
        return sum(r.state in _ON_NODE for r in self.replicas.values())

    def replica_of_job(self, job_id: str) -> Replica | None:
        return self._by_job(job_id)

    def job_of(self, replica: Replica) -> str:
        """The replica's job id: known from its request before the scheduler's answer or JobSubmitted is
        read, since topics are read in no order relative to each other and its TaskStarted, or even its
        end, may come first."""
        return replica.job_id or job_id_of_request(self.tenant, replica.request_id)

    # --- applying events -------------------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Change the state by one event (also how a stored history is replayed)."""
        self.version += 1
        match event:
            case ServiceScaled(to_replicas=to):
                self.desired = to
            case ServiceDeleted():
                self.state = ServiceState.DELETED
            case ReplicaRequested():
                self.replicas[event.replica_id] = Replica(
                    event.replica_id, event.request_id, event.seq, event.guaranteed, event.region
                )
                self.next_seq = max(self.next_seq, event.seq + 1)
            case ReplicaSubmitted():
                self._update(event.replica_id, job_id=event.job_id, state=_after_submit(self, event))
            case ReplicaPlaced():
                self._update(
                    event.replica_id,
                    state=_after_placed(self, event),
                    job_id=event.job_id,
                    node_id=event.node_id,
                    placed_region=event.region,
                    site=event.site,
                    attempt=event.attempt,
                )
            case ReplicaStarted():
                self._update(
                    event.replica_id,
                    state=ReplicaState.RUNNING,
                    job_id=event.job_id,
                    node_id=event.node_id,
                    attempt=event.attempt,
                )
            case ReplicaStopped(final=False):
                self._update(
                    event.replica_id,
                    state=ReplicaState.PENDING,
                    node_id="",
                    site="",
                    placed_region="",
                    attempt=event.attempt,
                )
            case ReplicaStopped() | ReplicaReleased():
                if isinstance(event, ReplicaReleased) and not event.job_id:
                    self._update(event.replica_id, state=ReplicaState.RELEASING)
                else:
                    self.replicas.pop(event.replica_id, None)
            case _:
                pass

    def _update(self, replica_id: str, **changes: Any) -> None:
        replica = self.replicas.get(replica_id)
        if replica is not None:
            self.replicas[replica_id] = replace(replica, **changes)

    # --- internals -------------------------------------------------------------------------------------

    def _record(self, decision: Decision) -> Decision:
        for event in decision.events:
            self.apply(event)
        return decision

    def _active(self) -> None:
        if self.state is ServiceState.DELETED:
            raise ServiceDeletedError(self.name)

    def _scale(self, to: int, reason: str, principal: str, policy: ReplicaPolicy) -> Decision:
        scaled = ServiceScaled(self.service_id, self.desired, to, reason, "", principal)
        decision = self._record(Decision((scaled,)))
        serving = self.serving_replicas
        if to > len(serving):
            return decision + self._add(to - len(serving), policy)
        # Down: surge replicas first, then those not placed yet, then the newest.
        order = sorted(serving, key=lambda r: (r.guaranteed, r.state in _ON_NODE, -r.seq))
        for replica in order[: len(serving) - to]:
            decision += self._release(replica, "scale-down")
        return decision

    def _add(self, count: int, policy: ReplicaPolicy) -> Decision:
        decision = Decision()
        for _ in range(count):
            serving = self.serving_replicas
            guaranteed = sum(r.guaranteed for r in serving) < self.spec.min_replicas
            seq = self.next_seq
            replica_id = f"{self.service_id}-r{seq}"
            request_id = REQUEST_PREFIX + replica_id
            region = self._next_region(serving)
            job = replica_job(self, seq, replica_id, guaranteed, region, policy)
            event = ReplicaRequested(self.service_id, replica_id, request_id, seq, guaranteed, region, job)
            decision += self._record(Decision((event,), (SubmitReplica(request_id, self.tenant, job),)))
        return decision

    def _next_region(self, serving: Sequence[Replica]) -> str:
        # Spread: the allowed region with the fewest replicas (first listed on a tie); without a spread
        # or an allow-list the scheduler picks among the allowed regions.
        if self.spec.spread == "none" or not self.spec.regions:
            return ""
        counts = {r: 0 for r in self.spec.regions}
        for replica in serving:
            if replica.region in counts:
                counts[replica.region] += 1
        return min(self.spec.regions, key=lambda r: counts[r])

    def _release(self, replica: Replica, reason: str) -> Decision:
        if replica.state is ReplicaState.RELEASING:
            return Decision()
        event = ReplicaReleased(self.service_id, replica.replica_id, replica.job_id, reason)
        orders: tuple[Order, ...] = ()
        if replica.job_id:
            orders = (CancelReplica(_cancel_id(replica.request_id), self.tenant, replica.job_id, reason),)
        return self._record(Decision((event,), orders))

    def _by_request(self, request_id: str) -> Replica | None:
        return next((r for r in self.replicas.values() if r.request_id == request_id), None)

    def _by_job(self, job_id: str) -> Replica | None:
        return next((r for r in self.replicas.values() if self.job_of(r) == job_id), None)


_ON_NODE = (ReplicaState.PLACED, ReplicaState.RUNNING)


def _after_placed(service: Service, event: ReplicaPlaced) -> ReplicaState:
    # Topics are read in no order relative to each other: a start already seen for this attempt stays.
    replica = service.replicas.get(event.replica_id)
    if replica is not None and replica.state is ReplicaState.RUNNING and replica.attempt == event.attempt:
        return ReplicaState.RUNNING
    return ReplicaState.PLACED


def _after_submit(service: Service, event: ReplicaSubmitted) -> ReplicaState:
    replica = service.replicas.get(event.replica_id)
    if replica is None or replica.state is not ReplicaState.REQUESTED:
        return replica.state if replica is not None else ReplicaState.PENDING
    return ReplicaState.PENDING


def _cancel_id(request_id: str) -> str:
    return f"{request_id}-cancel"


def replica_job(
    service: Service, seq: int, replica_id: str, guaranteed: bool, region: str, policy: ReplicaPolicy
) -> str:
    """The job spec (JSON text, the scheduler's job spec format) of one replica.

    One task, kind inference, the spec's per-replica resources; pinned to `region` for spread (else the
    spec's allowed regions); guaranteed replicas are not preemptible, surge replicas are.
    """
    resources = dict(service.document.get("resources") or {})
    regions = [region] if region else list(service.spec.regions)
    if regions:
        resources["regions"] = regions
    task: dict[str, Any] = {
        "name": "server",
        "resources": resources,
        # So a replica knows (and reports) which service it serves; a simulated agent also reads its batch.
        "env": {
            SERVICE_ENV: service.name,
            SERVICE_ID_ENV: service.service_id,
            REPLICA_ENV: replica_id,
            MODEL_ENV: service.spec.model,
            MAX_BATCH_ENV: str(service.spec.max_batch),
        },
    }
    if service.spec.command:
        task["command"] = service.spec.command
    if service.spec.args:
        task["args"] = list(service.spec.args)
    job = {
        "name": f"{service.name[:_JOB_NAME_STEM].rstrip('-')}-r{seq}",
        "queue": service.queue,
        "kind": "inference",
        "priority_class": policy.guaranteed_class if guaranteed else policy.surge_class,
        "preemptible": not guaranteed,
        "labels": {"suanli.serving/service": service.name, "suanli.serving/replica": replica_id},
        "tasks": [task],
    }
    return json.dumps(job, sort_keys=True)
