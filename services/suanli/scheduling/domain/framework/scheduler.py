"""The placement cycle for one task and for a gang, over an immutable snapshot.

`Scheduler(profile, rng).place_task(snapshot, request)` runs admission, filters, scores and device choice
and returns the decision together with the snapshot after it. `place_gang` places every task or none.
Given the same snapshot, request and generator state, the decision is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suanli.scheduling.domain.framework.plugin import Diagnosis, PluginContext
from suanli.scheduling.domain.framework.profile import Profile
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginRegistry
from suanli.scheduling.domain.framework.statement import Statement
from suanli.scheduling.domain.model import TaskPlacement, TaskRequest
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


@dataclass(frozen=True, slots=True)
class GangResult:
    snapshot: ClusterSnapshot
    assignments: tuple[Assignment, ...] = ()
    failed_task: int | None = None  # position of the first task that could not be placed
    diagnosis: Diagnosis | None = None

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

    def feasible(self, snapshot: ClusterSnapshot, request: TaskRequest) -> tuple[np.ndarray, Diagnosis]:
        """Rows of nodes passing every filter, and how many nodes each filter rejected first."""
        for plugin in self._admission:
            reason = plugin.admit(snapshot, request)
            if reason is not None:
                return np.empty(0, dtype=np.intp), Diagnosis(
                    snapshot.size, admission=f"{plugin.name}: {reason}"
                )
        alive = np.ones(snapshot.size, dtype=bool)
        rejected: list[tuple[str, int]] = []
        for plugin in self._filters:
            mask = plugin.filter(snapshot, request)
            before = int(alive.sum())
            alive &= mask
            rejected.append((plugin.name, before - int(alive.sum())))
            if not alive.any():
                break
        return np.flatnonzero(alive), Diagnosis(snapshot.size, tuple(rejected))

    def place_task(self, snapshot: ClusterSnapshot, request: TaskRequest) -> PlacementResult:
        rows, diagnosis = self.feasible(snapshot, request)
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

    def place_gang(self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest]) -> GangResult:
        """All tasks or none: each is placed against the view with the earlier ones staged."""
        statement = Statement(snapshot)
        for position, request in enumerate(requests):
            result = self.place_task(statement.snapshot, request)
            if result.assignment is None:
                return GangResult(statement.discard(), failed_task=position, diagnosis=result.diagnosis)
            statement.stage(request, result.assignment)
        after = statement.commit()
        return GangResult(after, assignments=tuple(a for _, a in statement.staged))

    def _pick(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray) -> int:
        """Position in `rows` of the best total score; ties broken uniformly at random."""
        if rows.size == 1:
            return 0
        total: np.ndarray | None = None
        for plugin, weight in self._scores:
            part = plugin.score(snapshot, request, rows, self.rng) * weight
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
