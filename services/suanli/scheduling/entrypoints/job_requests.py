"""SubmitJob and CancelJob as both the gRPC API and the command topic (`command_topic`) carry them out:
one validation, one admission check and one visibility rule, so a job submitted over Kafka is accepted or
refused exactly as the same request over gRPC would be (docs/commands.md).

`sees` says which tenants the requester may act for: the RPC's caller (`suanli.auth.context.sees`), or
the one tenant a command names.

A job the projection no longer holds (finished, evicted past the retention) is read from its stream: it
is answered, cancelled (a retry: the job; else refused as final) and recognised by its request_id as it
was before its eviction.
"""

from __future__ import annotations

from collections.abc import Callable

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.errors import PermissionDenied
from suanli.resources import DeviceCatalogue
from suanli.scheduling.domain.jobs import Actor, JobView
from suanli.scheduling.entrypoints.validation import check_gpu_models, validate_submit
from suanli.scheduling.service_layer.admission import Admission
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import CancelJob, SubmitJob
from suanli.scheduling.service_layer.errors import EvictedJob, InvalidSpec, JobNotFound
from suanli.scheduling.service_layer.history import StreamReader, archived_job
from suanli.scheduling.service_layer.job_commands import JobCommands, cancel_of_final, same_or_conflict
from suanli.scheduling.service_layer.projection import Projection

Sees = Callable[[str], bool]


class JobRequests:
    def __init__(
        self,
        commands: JobCommands,
        projection: Projection,
        capacity: CapacityView,
        admission: Admission,
        catalogue: DeviceCatalogue,
        archive: StreamReader,
    ) -> None:
        self.commands = commands
        self.projection = projection
        self.capacity = capacity
        self.admission = admission
        self.catalogue = catalogue
        self.archive = archive  # the event store: evicted jobs are folded from their streams

    async def job(self, job_id: str, sees: Sees) -> JobView:
        """The job `job_id`; another tenant's is answered like a missing one, so ids cannot be probed."""
        if not job_id:
            raise InvalidSpec("job_id", "is required")
        job = self.projection.jobs.get(job_id) or await archived_job(self.archive, job_id)
        if job is None or not sees(job.spec.tenant):
            raise JobNotFound(job_id)
        return job

    async def submit(self, request: pb.SubmitJobRequest, by: Actor | None, sees: Sees) -> JobView:
        spec = validate_submit(request)
        if not sees(spec.tenant):
            # The RPC's interceptor refuses this first (its REQUEST rule); a command names its tenant.
            raise PermissionDenied(f"spec.queue: queue {spec.queue!r} belongs to another tenant")
        # A retry of a recorded submit answers with its job: never refused by a check it passed (the
        # node reporting a model outside the catalogue may have left since) or a limit.
        if not (spec.request_id and (spec.tenant, spec.request_id) in self.projection.by_request):
            check_gpu_models(request.spec, self.catalogue, self.capacity.gpu_models)
            self.admission.admit_submit(spec.tenant, self.projection.pending_jobs(spec.tenant))
        try:
            job: JobView = await self.commands.handle(SubmitJob(spec, by))
        except EvictedJob as evicted:  # a retry of a submit whose job has been evicted since
            recorded = await archived_job(self.archive, evicted.job_id)
            if recorded is None:
                raise JobNotFound(evicted.job_id) from None
            return same_or_conflict(recorded, spec)
        return job

    async def cancel(
        self, job_id: str, reason: str, requested_by: str, by: Actor | None, sees: Sees
    ) -> JobView:
        found = await self.job(job_id, sees)
        if job_id not in self.projection.jobs:  # evicted, hence final
            return cancel_of_final(found)
        job: JobView = await self.commands.handle(CancelJob(job_id, reason, requested_by, by))
        return job
