"""The use cases: create, scale and delete services, and follow what the scheduler does with replicas."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import yaml

from suanli.jobspec.limits import queue_problem
from suanli.resources import DeviceCatalogue
from suanli.serving.domain.service import MANUAL, Decision, ReplicaPolicy, Service
from suanli.serving.domain.spec import ServiceSpecError, validate_service
from suanli.serving.service_layer.errors import InvalidField, ServiceNotFound
from suanli.serving.service_layer.ports import Services

# Job outcomes of jobs.events that end a replica, by the cause ReplicaStopped records.
ENDED_CAUSES = {"JobFailed": "failed", "JobSucceeded": "finished", "JobCancelled": "cancelled"}


def parse_document(text: str) -> dict[str, Any]:
    """The spec text (YAML or JSON) as a mapping; INVALID_ARGUMENT `spec: ...` otherwise."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidField("spec", f"not YAML or JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(document, dict):
        raise InvalidField("spec", "must be a mapping (the service spec document)")
    return document


@dataclass(frozen=True, slots=True)
class ServingService:
    catalogue: DeviceCatalogue
    policy: ReplicaPolicy
    new_service_id: Callable[[], str]
    known_regions: Collection[str] | None = None

    async def create(
        self, unit: Services, queue: str, document: dict[str, Any], replicas: int, principal: str
    ) -> Service:
        """Validate the spec (every problem, one `path: message` line each) and request the replicas."""
        queue = queue or str(document.get("queue") or "")
        if not queue:
            raise InvalidField("queue", "is required (in the request or the spec's `queue`)")
        if problem := queue_problem(queue):
            raise InvalidField("queue", problem)
        if document.get("queue") not in (None, "", queue):
            raise InvalidField("spec.queue", f"{document['queue']!r} differs from the request's {queue!r}")
        try:
            spec, _ = validate_service({**document, "queue": queue}, self.catalogue, self.known_regions)
        except ServiceSpecError as exc:
            raise ServiceSpecError([f"spec.{p}" for p in exc.problems]) from None
        if replicas < 0:
            raise InvalidField("replicas", f"must be 0 (min_replicas) or more, got {replicas}")
        tenant = queue.split("/")[0]
        service, decision = Service.create(
            self.new_service_id(), tenant, queue, document, spec, replicas, principal, self.policy
        )
        await unit.record(service, decision)
        return service

    async def scale(
        self, unit: Services, tenant: str, name: str, replicas: int, principal: str, reason: str = MANUAL
    ) -> Service:
        """Set the desired count: by hand (ScaleService, reason `manual`) or by the autoscaler
        (`autoscaler:<policy>`)."""
        service = await self._named(unit, tenant, name)
        await unit.record(service, service.scale(replicas, reason, principal, self.policy))
        return service

    async def delete(self, unit: Services, tenant: str, name: str, principal: str) -> Service:
        service = await self._named(unit, tenant, name)
        await unit.record(service, service.delete(principal))
        return service

    # --- facts of the scheduler's topics (the consumer's handler table calls these) ----------------------

    async def job_answered(
        self, unit: Services, request_id: str, ok: bool, job_id: str, code: str, message: str
    ) -> None:
        """JobCommandAnswered: a submission accepted (the job's id) or refused; cancels' answers change
        nothing."""
        service = await unit.of_request(request_id)
        if service is None:
            return
        if ok and job_id:
            await self._decide(unit, service, service.job_known(request_id, job_id))
        elif not ok:
            await self._decide(unit, service, service.job_refused(request_id, code, message))

    async def job_submitted(self, unit: Services, request_id: str, job_id: str) -> None:
        """JobSubmitted naming one of our request ids: the job's id, whichever of it and the reply comes
        first."""
        service = await unit.of_request(request_id)
        if service is not None:
            await self._decide(unit, service, service.job_known(request_id, job_id))

    async def task_placed(
        self, unit: Services, replica_id: str, job_id: str, node_id: str, region: str, site: str, attempt: int
    ) -> None:
        service = await unit.of_replica(replica_id)
        if service is not None:
            await self._decide(
                unit, service, service.placed(replica_id, job_id, node_id, region, site, attempt)
            )

    async def task_started(self, unit: Services, job_id: str, node_id: str, attempt: int) -> None:
        service = await unit.of_job(job_id)
        if service is not None:
            await self._decide(unit, service, service.started(job_id, node_id, attempt))

    async def job_requeued(self, unit: Services, job_id: str, attempt: int, reason: str) -> None:
        service = await unit.of_job(job_id)
        if service is not None:
            await self._decide(unit, service, service.job_requeued(job_id, attempt, reason))

    async def job_ended(self, unit: Services, job_id: str, event_name: str, reason: str) -> None:
        service = await unit.of_job(job_id)
        if service is not None:
            cause = ENDED_CAUSES[event_name]
            await self._decide(unit, service, service.job_ended(job_id, cause, reason, self.policy))

    async def _named(self, unit: Services, tenant: str, name: str) -> Service:
        service = await unit.named(tenant, name)
        if service is None:
            raise ServiceNotFound(tenant, name)
        return service

    @staticmethod
    async def _decide(unit: Services, service: Service, decision: Decision) -> None:
        if decision.events or decision.orders:
            await unit.record(service, decision)
