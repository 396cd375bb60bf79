"""Extension points of the placement framework (after kube-scheduler and Volcano).

A decision for one task runs: admission (reject a request outright, with a reason) -> filters (boolean mask
over all nodes, rejections counted per filter) -> scores (weighted sum over the feasible nodes, ties broken
by the injected random generator) -> device choice (which devices on the chosen node, how much of each) ->
post-filter hooks when nothing fits (the place where preemption plugs in).

Plugins are plain objects with a `name` and one method per extension point they implement. They receive
everything through arguments: the snapshot, the request, the candidate rows and the generator.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, runtime_checkable

import numpy as np

from suanli.scheduling.domain.fragmentation import FragmentationModel, TypicalTask
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.pricing import NO_PRICES, PriceTable
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot

if TYPE_CHECKING:
    from suanli.scheduling.domain.plugins._fragmentation import (
        FragmentationTracker,
        PlacementDeltas,
        StateTable,
    )


T = TypeVar("T")


class ProfileError(ValueError):
    """A profile names an unknown plugin, passes a bad argument, or misses what a plugin needs."""


@runtime_checkable
class AdmissionPlugin(Protocol):
    name: str

    def admit(self, snapshot: ClusterSnapshot, request: TaskRequest) -> str | None:
        """None to let the request through, else the reason it can never be placed."""


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray | None:
        """Boolean mask over all nodes: True where this plugin allows the task.

        None: the plugin has nothing to say about this task (it allows every node), so the framework
        skips the mask arithmetic; a constraint the task does not use costs nothing per decision.
        """


@runtime_checkable
class RowFilterPlugin(Protocol):
    """A filter that is a test of each node's own state, so it can be run on some rows only: the
    scheduler's per-request cache asks it about the nodes that changed since the request's last decision."""

    name: str

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray | None: ...

    def filter_rows(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray | slice
    ) -> np.ndarray | None:
        """Mask over `rows` (an index array, or a slice for every node): `filter(...)[rows]`, None when
        the filter allows every node. A new array or a read-only one: the caller never writes it."""


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray | None:
        """Scores of the feasible nodes `rows` (higher is better), same length as `rows`.

        None: the plugin scores every node alike for this task (it adds nothing to the total).
        """


@runtime_checkable
class RowLocalScorePlugin(Protocol):
    """A score that can say, per request, that it is row-local: each node's score is a function of that
    node's state (and of the context's network and prices) alone, whichever other rows are scored with it;
    it draws nothing from the generator; and whether it answers None depends on the request only. Then the
    scheduler may keep the node's total and recompute it only when the node changes."""

    name: str

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray | None: ...

    def row_local(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool: ...


@dataclass(frozen=True, slots=True)
class GangContext:
    """Where a gang stands when one of its tasks is scored: the nodes (rows) its earlier tasks went to,
    and how many of its tasks are still to place, this one included."""

    used: tuple[int, ...] = ()
    remaining: int = 1


@runtime_checkable
class GangScorePlugin(Protocol):
    """A score that also sees the gang: `score` is asked for tasks placed on their own, `score_gang` for
    the tasks of a gang (placed one after another, each against the view with the earlier ones staged)."""

    name: str

    def score(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray | None: ...

    def score_gang(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        rows: np.ndarray,
        rng: np.random.Generator,
        gang: GangContext,
    ) -> np.ndarray | None: ...


@runtime_checkable
class DevicePlugin(Protocol):
    name: str

    def choose(
        self, snapshot: ClusterSnapshot, request: TaskRequest, node: int, rng: np.random.Generator
    ) -> Assignment:
        """Which devices of `node` the task takes, and how many milli of each."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Why a task was not placed: an admission reason, or per-filter rejection counts."""

    nodes: int
    rejected_by: tuple[tuple[str, int], ...] = ()
    admission: str | None = None

    def message(self) -> str:
        if self.admission is not None:
            return f"not admitted: {self.admission}"
        parts = [f"{count} rejected by {name}" for name, count in self.rejected_by if count]
        return f"no node fits ({self.nodes} nodes): " + ", ".join(parts)


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: str

    def post_filter(
        self, snapshot: ClusterSnapshot, request: TaskRequest, diagnosis: Diagnosis
    ) -> tuple[Assignment, ...] | None:
        """Tasks to evict so that this one could fit (a preemption proposal), or None."""


@dataclass
class PluginContext:
    """What plugins may need beyond their arguments, shared by all plugins of one scheduler.

    `typical_tasks` is the workload distribution fragmentation-aware plugins measure against. The tracker and
    delta caches are created once and shared so that score and device plugins reuse each other's work.
    `network` is the cycle's network snapshot (empty: no view yet) and `prices` the price per CU-hour by
    device class and region (empty: prices play no part).
    """

    typical_tasks: tuple[TypicalTask, ...] = ()
    network: NetworkSnapshot = EMPTY_NETWORK
    prices: PriceTable = NO_PRICES
    _deltas: PlacementDeltas | None = field(default=None, repr=False)
    _shared: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """One object per key for every plugin of this context (caches a score and a device plugin of
        the same policy both read); `make` builds it on first use."""
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = make()
        return cast(T, found)

    def placement_deltas(self, plugin: str) -> PlacementDeltas:
        if self._deltas is None:
            if not self.typical_tasks:
                raise ProfileError(f"plugin {plugin!r} needs a workload distribution (typical tasks)")
            from suanli.scheduling.domain.plugins._fragmentation import FragmentationTracker, PlacementDeltas

            model = FragmentationModel(self.typical_tasks)
            self._deltas = PlacementDeltas(FragmentationTracker(model, self.node_states()))
        return self._deltas

    def node_states(self) -> StateTable:
        """The table of node states every fragmentation cache of this context groups identical nodes by."""
        from suanli.scheduling.domain.plugins._fragmentation import StateTable

        return self.shared("node-states", StateTable)

    def fragmentation(self, plugin: str) -> FragmentationTracker:
        return self.placement_deltas(plugin).tracker
