"""Reasons a job can never be placed on this cluster as it is, whatever runs or ends: its network
constraint rules out every region it could use, or its gang (kept to one region) exceeds what any single
region has in total. The cycle asks before quota, so such a job is not reported as short of quota.

Only clusters of several regions are judged for region size: in one region a gang too big for it is
what it was before regions were chosen (no node fits, or the gang is incomplete).
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.scheduling.domain.model import GPU_MILLI, Job, Locality, Node, TaskRequest
from suanli.scheduling.domain.network import NetworkSnapshot, region_exclusions
from suanli.scheduling.domain.queueing.reasons import NetworkConstraint, NoRegionFits


@dataclass(frozen=True, slots=True)
class _Totals:
    gpu_milli: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0


class StructuralCheck:
    def __init__(self, nodes: tuple[Node, ...], network: NetworkSnapshot) -> None:
        self._nodes = nodes
        self._network = network
        self._regions = tuple(sorted({n.region for n in nodes}))
        self._totals: dict[str, _Totals] | None = None  # per region, computed when first needed

    def reason(self, job: Job) -> NetworkConstraint | NoRegionFits | None:
        if not job.tasks or not self._regions:
            return None
        first = job.tasks[0].request
        requests = [t.request for t in job.tasks[: job.gang_size]]
        allowed = [r for r in self._regions if all(not q.regions or r in q.regions for q in requests)]
        if not allowed:
            return None  # the region filter says so, as before
        if first.data_region:
            why = region_exclusions(self._network, first, allowed)
            if all(w is not None for w in why):
                return NetworkConstraint(
                    first.data_region,
                    first.max_rtt_ms,
                    tuple((r, w) for r, w in zip(allowed, why, strict=True) if w is not None),
                )
            allowed = [r for r, w in zip(allowed, why, strict=True) if w is None]
        if job.placement_locality is Locality.ANY or len(self._regions) < 2:
            return None
        return self._too_big(job, requests, allowed)

    def _too_big(self, job: Job, requests: list[TaskRequest], allowed: list[str]) -> NoRegionFits | None:
        totals = self._region_totals()
        need = _Totals(
            sum(q.total_gpu_milli for q in requests),
            sum(q.cpu_milli for q in requests),
            sum(q.memory_mib for q in requests),
        )
        verdicts: list[tuple[str, str]] = []
        for region in allowed:
            has = totals[region]
            short = [
                f"{what} {wanted} > {total} in total"
                for what, wanted, total in (
                    ("GPU milli", need.gpu_milli, has.gpu_milli),
                    ("milli-CPU", need.cpu_milli, has.cpu_milli),
                    ("MiB memory", need.memory_mib, has.memory_mib),
                )
                if wanted > total
            ]
            if not short:
                return None
            verdicts.append((region, "the gang needs " + ", ".join(short)))
        return NoRegionFits(job.gang_size, str(job.placement_locality), tuple(verdicts))

    def _region_totals(self) -> dict[str, _Totals]:
        if self._totals is None:
            totals: dict[str, _Totals] = {}
            for n in self._nodes:
                t = totals.get(n.region, _Totals())
                totals[n.region] = _Totals(
                    t.gpu_milli + GPU_MILLI * len(n.gpus),
                    t.cpu_milli + n.cpu_milli,
                    t.memory_mib + n.memory_mib,
                )
            self._totals = totals
        return self._totals
