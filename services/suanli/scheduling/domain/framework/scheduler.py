"""The placement cycle for one task and for a gang, over an immutable snapshot.

`Scheduler(profile, rng).place_task(snapshot, request)` runs admission, filters, scores and device choice
and returns the decision together with the snapshot after it. `place_gang` places every task or none;
a gang kept to one region or zone (its locality) is placed region by region in the order region choice
ranks them (`regions.py`), on that region's nodes only, until one holds it.
Given the same snapshot, request and generator state, the decision is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suanli.scheduling.domain.framework.plugin import Diagnosis, PluginContext
from suanli.scheduling.domain.framework.profile import Profile
from suanli.scheduling.domain.framework.regions import (
    RegionCandidate,
    linked_regions,
    rank_regions,
    zone_order,
)
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginRegistry
from suanli.scheduling.domain.framework.statement import Statement
from suanli.scheduling.domain.model import Locality, TaskPlacement, TaskRequest
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot


@dataclass(frozen=True, slots=True)
class PlacementResult:
    snapshot: ClusterSnapshot  # after the placement; unchanged when nothing was placed
    assignment: Assignment | None = None
    diagnosis: Diagnosis | None = None
    preemption: tuple[Assignment, ...] | None = None  # what a post-filter plugin proposes to evict

    @property
    def placed(self) -> bool:
        return self.assignment is not None

    @property
    def node_id(self) -> str | None:
        return None if self.assignment is None else self.snapshot.node_ids[self.assignment.node]

    def placement(self, task_id: str) -> TaskPlacement:
        if self.assignment is None:
            raise ValueError("nothing was placed")
        a = self.assignment
        return TaskPlacement(task_id, self.snapshot.node_ids[a.node], a.gpu_indices, a.gpu_milli)


LOCALITY_FILTER = "locality"  # how placement reports the nodes outside the region or zone being tried


@dataclass(frozen=True, slots=True)
class RegionOutcome:
    """What became of one region in a gang's region choice: `verdict` is 'chosen', why it was excluded,
    or why the gang did not fit there."""

    region: str
    verdict: str
    rtt_ms: float | None = None
    cu_hour: float | None = None
    score: float | None = None


@dataclass(frozen=True, slots=True)
class GangResult:
    snapshot: ClusterSnapshot
    assignments: tuple[Assignment, ...] = ()
    failed_task: int | None = None  # position of the first task that could not be placed
    diagnosis: Diagnosis | None = None
    regions: tuple[RegionOutcome, ...] = ()  # region choice, when it ran
    network_excluded: bool = False  # every region was ruled out by the network constraint
    within: np.ndarray | None = None  # the nodes the gang was kept to (its region or zone)

    @property
    def placed(self) -> bool:
        return self.failed_task is None


class Scheduler:
    def __init__(
        self,
        profile: Profile,
        rng: np.random.Generator,
        context: PluginContext | None = None,
        registry: PluginRegistry | None = None,
    ) -> None:
        if registry is None:
            from suanli.scheduling.domain.plugins import default_registry

            registry = default_registry()
        self.profile = profile
        self.rng = rng
        self.context = context or PluginContext()
        # "ordered" ranks nodes once by a seeded permutation and always prefers the earlier node among equal
        # scores. Consistent tie-breaking concentrates load (as the FGD paper's simulator does, which
        # shuffles node order per seed and takes the first best node); "random" spreads it.
        self._rank: np.ndarray | None = np.empty(0, dtype=np.intp) if profile.tie_break == "ordered" else None
        build = registry.build
        ctx = self.context
        self._admission = [build(ExtensionPoint.ADMISSION, r.name, r.args, ctx) for r in profile.admission]
        self._filters = [build(ExtensionPoint.FILTER, r.name, r.args, ctx) for r in profile.filters]
        self._scores = [(build(ExtensionPoint.SCORE, r.name, r.args, ctx), r.weight) for r in profile.scores]
        self._devices = build(ExtensionPoint.DEVICES, profile.devices.name, profile.devices.args, ctx)
        self._post = [build(ExtensionPoint.POST_FILTER, r.name, r.args, ctx) for r in profile.post_filters]

    def feasible(
        self, snapshot: ClusterSnapshot, request: TaskRequest, within: np.ndarray | None = None
    ) -> tuple[np.ndarray, Diagnosis]:
        """Rows of nodes passing every filter, and how many nodes each filter rejected first; `within`
        (a mask over nodes) keeps the search to a region or zone."""
        for plugin in self._admission:
            reason = plugin.admit(snapshot, request)
            if reason is not None:
                return np.empty(0, dtype=np.intp), Diagnosis(
                    snapshot.size, admission=f"{plugin.name}: {reason}"
                )
        rejected: list[tuple[str, int]] = []
        if within is None:
            alive = np.ones(snapshot.size, dtype=bool)
        else:
            alive = within.copy()
            rejected.append((LOCALITY_FILTER, snapshot.size - int(alive.sum())))
        for plugin in self._filters:
            mask = plugin.filter(snapshot, request)
            if mask is None:
                rejected.append((plugin.name, 0))
                continue
            before = int(alive.sum())
            alive &= mask
            rejected.append((plugin.name, before - int(alive.sum())))
            if not alive.any():
                break
        return np.flatnonzero(alive), Diagnosis(snapshot.size, tuple(rejected))

    def place_task(
        self, snapshot: ClusterSnapshot, request: TaskRequest, within: np.ndarray | None = None
    ) -> PlacementResult:
        rows, diagnosis = self.feasible(snapshot, request, within)
        if rows.size == 0:
            preemption = None
            for plugin in self._post:
                preemption = plugin.post_filter(snapshot, request, diagnosis)
                if preemption is not None:
                    break
            return PlacementResult(snapshot, diagnosis=diagnosis, preemption=preemption)
        node = int(rows[self._pick(snapshot, request, rows)])
        where = self._devices.choose(snapshot, request, node, self.rng)
        return PlacementResult(snapshot.assign(request, where), assignment=where)

    def place_gang(
        self,
        snapshot: ClusterSnapshot,
        requests: Sequence[TaskRequest],
        locality: Locality = Locality.ANY,
        min_bandwidth_gbps: float | None = None,
    ) -> GangResult:
        """All tasks or none. `locality` region or zone keeps them to one region (one zone) chosen
        before the nodes; `any` lets them spread, over regions linked by `min_bandwidth_gbps` when set.
        A single task with a data region also goes through region choice (network and price count)."""
        if not requests:
            return GangResult(snapshot)
        data_region = requests[0].data_region
        if locality is Locality.ANY and (len(requests) > 1 or not data_region):
            if min_bandwidth_gbps and len(snapshot.regions) > 1:
                return self._place_linked(snapshot, requests, min_bandwidth_gbps)
            return self._place_within(snapshot, requests, None)
        if locality is Locality.REGION and len(snapshot.regions) == 1 and not data_region:
            return self._place_within(snapshot, requests, None)  # one region: nothing to choose
        return self._place_by_region(snapshot, requests, locality)

    def _place_within(
        self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], within: np.ndarray | None
    ) -> GangResult:
        """Each task placed against the view with the earlier ones staged, on `within` only."""
        statement = Statement(snapshot)
        for position, request in enumerate(requests):
            result = self.place_task(statement.snapshot, request, within)
            if result.assignment is None:
                return GangResult(statement.discard(), failed_task=position, diagnosis=result.diagnosis)
            statement.stage(request, result.assignment)
        after = statement.commit()
        return GangResult(after, assignments=tuple(a for _, a in statement.staged), within=within)

    def _place_by_region(
        self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], locality: Locality
    ) -> GangResult:
        candidates = rank_regions(snapshot, requests, self.context, self.profile.region_choice)
        outcomes: list[RegionOutcome] = []
        failed: GangResult | None = None
        gpu_work = any(r.gpu_count for r in requests)
        for c in candidates:
            if c.excluded is not None:
                outcomes.append(_outcome(c, c.excluded))
                continue
            if locality is Locality.ZONE:
                masks = [snapshot.zone_code == z for z in zone_order(snapshot, c.code, gpu_work)]
            else:
                masks = [snapshot.region_code == c.code]
            attempt: GangResult | None = None  # the zone (or region) that came closest
            for mask in masks:
                tried = self._place_within(snapshot, requests, mask)
                if attempt is None or (tried.failed_task or 0) > (attempt.failed_task or 0):
                    attempt = tried
                if tried.placed:
                    attempt = tried
                    outcomes.append(_outcome(c, "chosen"))
                    outcomes.extend(
                        _outcome(o, o.excluded or "not tried: a better region held the job")
                        for o in candidates[len(outcomes) :]
                    )
                    return GangResult(
                        attempt.snapshot, attempt.assignments, regions=tuple(outcomes), within=mask
                    )
            assert attempt is not None
            outcomes.append(_outcome(c, _why_not(attempt, len(requests), locality)))
            failed = failed or attempt
        network_excluded = (
            bool(candidates)
            and all(
                c.network_excluded or c.excluded == "not in the job's regions allow-list" for c in candidates
            )
            and any(c.network_excluded for c in candidates)
        )
        # No region was tried: what the filters say over the whole cluster is the closest explanation.
        diagnosis = failed.diagnosis if failed is not None else self.feasible(snapshot, requests[0])[1]
        return GangResult(
            snapshot,
            failed_task=failed.failed_task if failed is not None else 0,
            diagnosis=diagnosis,
            regions=tuple(outcomes),
            network_excluded=network_excluded,
        )

    def _place_linked(
        self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], min_gbps: float
    ) -> GangResult:
        """Locality `any` with a bandwidth floor: each task may go to any region linked by at least
        `min_gbps` to every region the gang already uses."""
        statement = Statement(snapshot)
        used: set[int] = set()
        for position, request in enumerate(requests):
            within = None
            if used:
                within = linked_regions(self.context, snapshot, used, min_gbps)[snapshot.region_code]
            result = self.place_task(statement.snapshot, request, within)
            if result.assignment is None:
                return GangResult(statement.discard(), failed_task=position, diagnosis=result.diagnosis)
            used.add(int(snapshot.region_code[result.assignment.node]))
            statement.stage(request, result.assignment)
        after = statement.commit()
        return GangResult(after, assignments=tuple(a for _, a in statement.staged))

    def _pick(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray) -> int:
        """Position in `rows` of the best total score; ties broken uniformly at random."""
        if rows.size == 1:
            return 0
        total: np.ndarray | None = None
        for plugin, weight in self._scores:
            scored = plugin.score(snapshot, request, rows, self.rng)
            if scored is None:
                continue
            part = scored * weight
            total = part if total is None else total + part
        if total is None:
            return int(self.rng.integers(rows.size))
        best = np.flatnonzero(total == total.max())
        if best.size == 1:
            return int(best[0])
        if self._rank is not None:
            if self._rank.size != snapshot.size:
                self._rank = self.rng.permutation(snapshot.size)
            return int(best[np.argmin(self._rank[rows[best]])])
        return int(best[self.rng.integers(best.size)])


def _outcome(c: RegionCandidate, verdict: str) -> RegionOutcome:
    return RegionOutcome(c.region, verdict, c.rtt_ms, c.cu_hour, None if c.excluded else round(c.score, 4))


def _why_not(attempt: GangResult, size: int, locality: Locality) -> str:
    where = "any one zone" if locality is Locality.ZONE else "the region"
    placed = attempt.failed_task or 0
    diagnosis = attempt.diagnosis
    detail = ""
    if diagnosis is not None:
        if diagnosis.admission is not None:
            detail = diagnosis.admission
        else:
            detail = ", ".join(
                f"{n} rejected by {name}"
                for name, n in diagnosis.rejected_by
                if n and name != LOCALITY_FILTER
            )
    return f"only {placed} of {size} tasks fit in {where}" + (f" ({detail})" if detail else "")
