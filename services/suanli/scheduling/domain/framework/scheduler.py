"""The placement cycle for one task and for a gang, over an immutable snapshot.

`Scheduler(profile, rng).place_task(snapshot, request)` runs admission, filters, scores and device choice
and returns the decision together with the snapshot after it. `place_gang` places every task or none;
a gang kept to one region, zone, fabric domain or node (its locality) is placed region by region in the
order region choice ranks them (`regions.py`), on that region's nodes only, until one holds it. Each task
of a gang is scored knowing where the earlier ones went (`GangContext`), which is what the topology score
uses to keep a gang together. `rank` orders the candidates of a task exactly as the decision does (the
same scores and tie-break), so an explanation's best node is the node the decision takes.
Given the same snapshot, request and generator state, the decision is the same.

A task on its own (no region, zone or gang context) whose filters and scores are all per-node functions
of the node's state (`filter_rows`, `row_local`) is decided from a per-request cache of every node's total
score (`_Choice`), recomputed only on the nodes whose stamp moved since that request was last decided;
the pick over it (best total, the same tie-break, the same draws) is the one the full evaluation makes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from suanli.scheduling.domain.framework.cache import StampedRows
from suanli.scheduling.domain.framework.plugin import (
    Diagnosis,
    GangContext,
    GangScorePlugin,
    PluginContext,
    RowFilterPlugin,
    RowLocalScorePlugin,
)
from suanli.scheduling.domain.framework.profile import Profile
from suanli.scheduling.domain.framework.regions import (
    RegionCandidate,
    domain_order,
    linked_regions,
    rank_regions,
)
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginRegistry
from suanli.scheduling.domain.framework.statement import Statement
from suanli.scheduling.domain.model import Locality, TaskPlacement, TaskRequest
from suanli.scheduling.domain.network import NetworkSnapshot
from suanli.scheduling.domain.pricing import PriceTable
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot, sorted_unique

# Requests whose totals the scheduler keeps (least recently decided dropped first), at most
# CHOICE_CACHE_SIZE and CHOICE_CACHE_BYTES together (each costs about 25 bytes per node): openb's
# `default` trace asks ~110 distinct requests in its first 2,000 arrivals, most of them rarely.
CHOICE_CACHE_SIZE = 128
CHOICE_CACHE_BYTES = 128 << 20
CHOICE_BYTES_PER_NODE = 25


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
class Ranking:
    """The feasible nodes of one task in the order the decision ranks them (`rows[0]` is the node it
    takes), with their total scores and each score plugin's weighted part (in profile order)."""

    rows: np.ndarray
    total: np.ndarray
    parts: tuple[tuple[str, np.ndarray], ...]
    diagnosis: Diagnosis


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
    within: np.ndarray | None = None  # the nodes the gang was kept to (its region, zone, domain or node)

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
        tie_seed: int | None = None,
        incremental: bool = True,
    ) -> None:
        """`incremental=False` evaluates every feasible node on every decision (what the per-request cache
        saves; the decisions are the same either way, which the tests and `bench/placement.py` check)."""
        if registry is None:
            from suanli.scheduling.domain.plugins import default_registry

            registry = default_registry()
        self.profile = profile
        self.rng = rng
        self.context = context or PluginContext()
        # "ordered" ranks nodes once by a seeded permutation and always prefers the earlier node among equal
        # scores. Consistent tie-breaking concentrates load (as the FGD paper's simulator does, which
        # shuffles node order per seed and takes the first best node); "random" spreads it.
        # With `tie_seed` the ranking is a hash of (seed, node id) instead of a draw: the same across
        # schedulers, cycles and fleet changes, so a later explanation breaks ties as the decision did
        # (the simulators draw it, as the paper's simulator does).
        self._rank: np.ndarray | None = np.empty(0, dtype=np.intp) if profile.tie_break == "ordered" else None
        self._tie_seed = tie_seed
        self._ranked_ids: tuple[str, ...] | None = None
        build = registry.build
        ctx = self.context
        self._admission = [build(ExtensionPoint.ADMISSION, r.name, r.args, ctx) for r in profile.admission]
        self._filters = [build(ExtensionPoint.FILTER, r.name, r.args, ctx) for r in profile.filters]
        self._scores = [(build(ExtensionPoint.SCORE, r.name, r.args, ctx), r.weight) for r in profile.scores]
        self._gang_aware = [isinstance(plugin, GangScorePlugin) for plugin, _ in self._scores]
        self._devices = build(ExtensionPoint.DEVICES, profile.devices.name, profile.devices.args, ctx)
        self._post = [build(ExtensionPoint.POST_FILTER, r.name, r.args, ctx) for r in profile.post_filters]
        self._choices: dict[TaskRequest, _Choice] = {}
        self._positions = np.empty(0, dtype=np.int64)
        self._positions_of: np.ndarray | None = None
        self._row_filters: list[RowFilterPlugin] = [
            f for f in self._filters if isinstance(f, RowFilterPlugin)
        ]
        self._row_scores: list[RowLocalScorePlugin] = [
            p for p, _ in self._scores if isinstance(p, RowLocalScorePlugin)
        ]
        self._incremental = (
            incremental
            and len(self._row_filters) == len(self._filters)
            and len(self._row_scores) == len(self._scores)
        )

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
            before = int(np.count_nonzero(alive))
            alive &= mask
            rejected.append((plugin.name, before - int(np.count_nonzero(alive))))
            if not alive.any():
                break
        return np.flatnonzero(alive), Diagnosis(snapshot.size, tuple(rejected))

    def place_task(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        within: np.ndarray | None = None,
        gang: GangContext | None = None,
    ) -> PlacementResult:
        """One task; `gang` says where the earlier tasks of its gang went (None: a task on its own)."""
        if within is None and gang is None and self._cacheable(snapshot, request):
            node = self._cached_pick(snapshot, request)
            if node is not None:
                where = self._devices.choose(snapshot, request, node, self.rng)
                return PlacementResult(snapshot.assign(request, where), assignment=where)
            # Nothing fits: the full evaluation below finds that too and says why.
        rows, diagnosis = self.feasible(snapshot, request, within)
        if rows.size == 0:
            preemption = None
            for plugin in self._post:
                preemption = plugin.post_filter(snapshot, request, diagnosis)
                if preemption is not None:
                    break
            return PlacementResult(snapshot, diagnosis=diagnosis, preemption=preemption)
        node = int(rows[self._pick(snapshot, request, rows, gang)])
        where = self._devices.choose(snapshot, request, node, self.rng)
        return PlacementResult(snapshot.assign(request, where), assignment=where)

    def place_gang(
        self,
        snapshot: ClusterSnapshot,
        requests: Sequence[TaskRequest],
        locality: Locality = Locality.ANY,
        min_bandwidth_gbps: float | None = None,
    ) -> GangResult:
        """All tasks or none. `locality` region, zone, fabric or node keeps them to one region (one zone,
        one fabric domain, one node) chosen before the nodes; `any` lets them spread, over regions linked
        by `min_bandwidth_gbps` when set. A single task with a data region also goes through region choice
        (network and price count)."""
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
        self,
        snapshot: ClusterSnapshot,
        requests: Sequence[TaskRequest],
        within: np.ndarray | None,
        used: tuple[int, ...] = (),
    ) -> GangResult:
        """Each task placed against the view with the earlier ones staged, on `within` only; `used` are
        nodes the gang holds already (the placed part of a gang that grows)."""
        statement = Statement(snapshot)
        for position, request in enumerate(requests):
            gang = GangContext(used, len(requests) - position)
            result = self.place_task(statement.snapshot, request, within, gang)
            if result.assignment is None:
                return GangResult(statement.discard(), failed_task=position, diagnosis=result.diagnosis)
            statement.stage(request, result.assignment)
            used = (*used, result.assignment.node)
        after = statement.commit()
        return GangResult(after, assignments=tuple(a for _, a in statement.staged), within=within)

    def _place_by_region(
        self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], locality: Locality
    ) -> GangResult:
        candidates = rank_regions(snapshot, requests, self.context, self.profile.region_choice)
        outcomes: list[RegionOutcome] = []
        failed: GangResult | None = None
        for c in candidates:
            if c.excluded is not None:
                outcomes.append(_outcome(c, c.excluded))
                continue
            attempt: GangResult | None = None  # the zone (or region) that came closest
            for mask in self._masks(snapshot, requests, c.code, locality):
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
            if attempt is None:  # no fabric domain, or no node with room for the whole gang
                attempt = self._place_within(snapshot, requests, np.zeros(snapshot.size, dtype=bool))
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

    def _masks(
        self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], region: int, locality: Locality
    ) -> Iterator[np.ndarray]:
        """The node sets of `region` a gang of this locality is tried on, in order."""
        in_region = snapshot.region_code == region
        gpu_work = any(r.gpu_count for r in requests)
        if locality is Locality.ZONE:
            for z in domain_order(snapshot, snapshot.zone_code, in_region, gpu_work):
                yield snapshot.zone_code == z
        elif locality is Locality.FABRIC:
            for f in domain_order(snapshot, snapshot.fabric_code, in_region, gpu_work):
                yield snapshot.fabric_code == f
        elif locality is Locality.NODE:
            # Nodes with room for the gang's total, best first as the first task would rank them.
            room = in_region & _holds_total(snapshot, requests)
            for row in self.rank(snapshot, requests[0], room, GangContext((), len(requests))).rows:
                mask = np.zeros(snapshot.size, dtype=bool)
                mask[row] = True
                yield mask
        else:
            yield in_region

    def _place_linked(
        self, snapshot: ClusterSnapshot, requests: Sequence[TaskRequest], min_gbps: float
    ) -> GangResult:
        """Locality `any` with a bandwidth floor: each task may go to any region linked by at least
        `min_gbps` to every region the gang already uses."""
        statement = Statement(snapshot)
        used: set[int] = set()
        nodes: tuple[int, ...] = ()
        for position, request in enumerate(requests):
            within = None
            if used:
                within = linked_regions(self.context, snapshot, used, min_gbps)[snapshot.region_code]
            gang = GangContext(nodes, len(requests) - position)
            result = self.place_task(statement.snapshot, request, within, gang)
            if result.assignment is None:
                return GangResult(statement.discard(), failed_task=position, diagnosis=result.diagnosis)
            used.add(int(snapshot.region_code[result.assignment.node]))
            nodes = (*nodes, result.assignment.node)
            statement.stage(request, result.assignment)
        after = statement.commit()
        return GangResult(after, assignments=tuple(a for _, a in statement.staged))

    def rank(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        within: np.ndarray | None = None,
        gang: GangContext | None = None,
    ) -> Ranking:
        """Every feasible node for `request`, ordered as `place_task` would rank them: the node it takes
        first, then the others by total score (ties in the ordered ranking, else by position). It draws
        from the generator as a decision does (random ties, random scores)."""
        rows, diagnosis = self.feasible(snapshot, request, within)
        if rows.size == 0:
            return Ranking(rows, np.empty(0), (), diagnosis)
        total, parts = self._totals(snapshot, request, rows, gang, keep_parts=True)
        first = self._choose(snapshot, rows, total) if rows.size > 1 else 0
        score = np.zeros(rows.size) if total is None else total
        tie = self._tie_rank(snapshot)[rows] if self._rank is not None else np.arange(rows.size)
        order = np.lexsort((tie, -score))
        order = np.concatenate(([first], order[order != first]))
        return Ranking(rows[order], score[order], tuple((n, p[order]) for n, p in parts), diagnosis)

    def _totals(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        rows: np.ndarray,
        gang: GangContext | None,
        keep_parts: bool = False,
    ) -> tuple[np.ndarray | None, list[tuple[str, np.ndarray]]]:
        """The weighted sum of the score plugins over `rows` (None: every plugin scored them alike) and,
        with `keep_parts`, each plugin's weighted part (zeros where it scored all alike)."""
        total: np.ndarray | None = None
        parts: list[tuple[str, np.ndarray]] = []
        for (plugin, weight), gang_aware in zip(self._scores, self._gang_aware, strict=True):
            if gang_aware and gang is not None:
                scored = plugin.score_gang(snapshot, request, rows, self.rng, gang)
            else:
                scored = plugin.score(snapshot, request, rows, self.rng)
            if scored is None:
                if keep_parts:
                    parts.append((plugin.name, np.zeros(rows.size)))
                continue
            part = np.asarray(scored, dtype=np.float64)
            if weight != 1:  # x * 1 is x: the copy a whole cluster's scores would cost is saved
                part = part * weight
            if keep_parts:
                parts.append((plugin.name, part))
            total = part if total is None else total + part
        return total, parts

    def _pick(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, gang: GangContext | None
    ) -> int:
        """Position in `rows` of the best total score; ties broken by the profile's tie-break."""
        if rows.size == 1:
            return 0
        total, _ = self._totals(snapshot, request, rows, gang)
        return self._choose(snapshot, rows, total)

    def _cacheable(self, snapshot: ClusterSnapshot, request: TaskRequest) -> bool:
        if not self._incremental:
            return False
        if any(plugin.admit(snapshot, request) is not None for plugin in self._admission):
            return False
        return all(plugin.row_local(snapshot, request) for plugin in self._row_scores)

    def _cached_pick(self, snapshot: ClusterSnapshot, request: TaskRequest) -> int | None:
        """The node `place_task`'s full evaluation picks, from the request's cached totals brought up to
        date on the nodes that changed; None when no node fits. The score plugins are asked exactly when
        the full evaluation asks them (more than one node fits), about the changed nodes only, so their
        own caches see the same decisions and compute the same batches of nodes as they would there."""
        ctx = self.context
        choice = self._choices.pop(request, None)
        if choice is not None and (choice.network is not ctx.network or choice.prices is not ctx.prices):
            choice = None
        if choice is None:
            choice = _Choice(ctx.network, ctx.prices)
            room = min(
                CHOICE_CACHE_SIZE, max(1, CHOICE_CACHE_BYTES // (CHOICE_BYTES_PER_NODE * snapshot.size))
            )
            while len(self._choices) >= room:
                del self._choices[next(iter(self._choices))]
        self._choices[request] = choice  # most recently decided last
        stale = choice.rows.stale(snapshot)
        if stale is None or choice.total.shape[0] != snapshot.size:
            stale = None
            choice.reset(snapshot.size)
        rows = self._fits(snapshot, request, stale, choice)
        if choice.count == 0:
            return None
        if choice.count == 1:
            # Taken without scoring, as the full path takes it; the changed nodes stay to be scored by the
            # next decision that scores (nothing is marked).
            return int(np.flatnonzero(choice.alive)[0])
        self._score(snapshot, request, stale, rows, choice)
        choice.rows.mark(snapshot, stale)
        if choice.scored and choice.exact and self._rank is not None and self._ranked(snapshot):
            # Ties go to the lowest rank: one argmax over (total, -rank) packed into one exact float.
            return self._keys(snapshot, choice).best()
        total = choice.total
        top = total.max()
        best = np.flatnonzero(total == top)
        if best.size == 1:
            return int(best[0])
        if choice.scored and self._rank is not None:
            return int(best[np.argmin(self._tie_rank(snapshot)[best])])
        # Every score alike (uniform among the feasible) or random ties: the draw the full path makes.
        return int(best[self.rng.integers(best.size)])

    def _fits(
        self, snapshot: ClusterSnapshot, request: TaskRequest, target: np.ndarray | None, choice: _Choice
    ) -> np.ndarray:
        """Runs the filters on `target` (rows; None: every node) into the cached feasibility and count;
        the rows of `target` that pass."""
        where: np.ndarray | slice = slice(None) if target is None else target
        alive: np.ndarray | None = None
        for plugin in self._row_filters:
            mask = plugin.filter_rows(snapshot, request, where)
            if mask is not None:
                alive = mask if alive is None else alive & mask
        if target is None:
            choice.alive = np.ones(snapshot.size, dtype=bool) if alive is None else alive.copy()
            choice.count = int(np.count_nonzero(choice.alive))
            return np.flatnonzero(choice.alive)
        if alive is None:
            alive = np.ones(target.size, dtype=bool)
        choice.count += int(np.count_nonzero(alive)) - int(np.count_nonzero(choice.alive[target]))
        choice.alive[target] = alive
        rows: np.ndarray = target[alive]
        return rows

    def _score(
        self,
        snapshot: ClusterSnapshot,
        request: TaskRequest,
        target: np.ndarray | None,
        rows: np.ndarray,
        choice: _Choice,
    ) -> None:
        """Weighted scores of `rows` (the feasible ones of `target`; None: every node), summed in profile
        order as `_totals` sums them, into the cached totals; -inf on the other rows of `target`."""
        total, _ = self._totals(snapshot, request, rows, None)
        where: np.ndarray | slice = slice(None) if target is None else target
        if rows.size < choice.total.size:  # every node fits: all of them are written below
            choice.total[where] = -np.inf
        if rows.size:
            choice.scored = total is not None
            # `rows` are sorted and unique: as many as there are nodes is every node, in order.
            into = rows if rows.size < choice.total.size else slice(None)
            choice.total[into] = 0.0 if total is None else total
            if total is not None and choice.exact:
                choice.exact = _packable(total, snapshot.size)
        if choice.key is not None:
            if choice.exact and target is not None:
                choice.key.update(target, choice.total[target], self._rank_positions()[target])
            else:
                choice.key = None

    def _ranked(self, snapshot: ClusterSnapshot) -> bool:
        """Whether the ordered tie-break's ranking of `snapshot`'s nodes exists without drawing it (the
        full path draws it at the first tie, and so does the cached one until then)."""
        if self._tie_seed is not None:
            return True
        return self._rank is not None and self._rank.size == snapshot.size

    def _rank_positions(self) -> np.ndarray:
        """The ordered tie-break's ranks as positions 0..n-1 (hashed ranks may be any integers)."""
        rank = self._rank
        assert rank is not None
        if self._positions_of is not rank:
            # Drawn ranks are a permutation already; hashed ones come with their positions (`_tie_rank`).
            self._positions = rank
            self._positions_of = rank
        return self._positions

    def _keys(self, snapshot: ClusterSnapshot, choice: _Choice) -> PackedKeys:
        rank = self._tie_rank(snapshot)
        if choice.key is None or choice.key_rank is not rank:
            choice.key = PackedKeys(choice.total, self._rank_positions())
            choice.key_rank = rank
        return choice.key

    def _choose(self, snapshot: ClusterSnapshot, rows: np.ndarray, total: np.ndarray | None) -> int:
        if total is None:
            return int(self.rng.integers(rows.size))
        best = np.flatnonzero(total == total.max())
        if best.size == 1:
            return int(best[0])
        if self._rank is not None:
            return int(best[np.argmin(self._tie_rank(snapshot)[rows[best]])])
        return int(best[self.rng.integers(best.size)])

    def _tie_rank(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """The ordered tie-break's rank of every node (lower wins), drawn once or hashed from node ids."""
        assert self._rank is not None
        if self._tie_seed is None:
            if self._rank.size != snapshot.size:
                self._rank = self.rng.permutation(snapshot.size)
        elif self._ranked_ids is not snapshot.node_ids:
            self._rank, self._positions = _hashed_ranks(self._tie_seed, snapshot.node_ids)
            self._positions_of = self._rank
            self._ranked_ids = snapshot.node_ids
        return self._rank


@functools.lru_cache(maxsize=8)
def _hashed_ranks(seed: int, node_ids: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """A fleet's hashed tie ranks and the same as positions 0..n-1, shared read-only by the schedulers of
    every cycle that sees the fleet (each cycle's scheduler is new; the fleet rarely is)."""
    ranks = np.fromiter(
        (_hashed(seed, node_id) for node_id in node_ids), dtype=np.uint64, count=len(node_ids)
    )
    order = np.argsort(ranks, kind="stable")  # equal hashes: the lower row first, as argmin
    positions = np.empty(ranks.size, dtype=np.int64)
    positions[order] = np.arange(ranks.size)
    ranks.setflags(write=False)
    positions.setflags(write=False)
    return ranks, positions


def _hashed(seed: int, node_id: str) -> int:
    digest = hashlib.blake2b(f"{seed}:{node_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _holds_total(snapshot: ClusterSnapshot, requests: Sequence[TaskRequest]) -> np.ndarray:
    """[nodes] True where the free room covers the gang's total (necessary for the gang on one node)."""
    cpu = sum(r.cpu_milli for r in requests)
    memory = sum(r.memory_mib for r in requests)
    whole = sum(r.gpu_count for r in requests if r.gpu_count and not r.is_shared_gpu)
    milli = sum(r.total_gpu_milli for r in requests)
    ok: np.ndarray = (
        (snapshot.cpu_free >= cpu)
        & (snapshot.mem_free >= memory)
        & (snapshot.gpu_full >= whole)
        & (snapshot.gpu_free.sum(axis=1) >= milli)
    )
    return ok


def _outcome(c: RegionCandidate, verdict: str) -> RegionOutcome:
    return RegionOutcome(c.region, verdict, c.rtt_ms, c.cu_hour, None if c.excluded else round(c.score, 4))


_WHERE = {
    Locality.ZONE: "any one zone",
    Locality.FABRIC: "any one fabric domain",
    Locality.NODE: "any one node",
}


def _why_not(attempt: GangResult, size: int, locality: Locality) -> str:
    where = _WHERE.get(locality, "the region")
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


class _Choice:
    """One request's feasibility and total score on every node (-inf where a filter rejects it) and the
    node stamps they were computed at; `scored` False when every score plugin scored the nodes alike
    (None). Valid for the network and prices it was computed with.

    With the ordered tie-break and whole-number totals (the integer FGD scores under integer weights),
    `key` packs (total, -rank) into one float, total x 2^k - rank, exact while |total| x 2^k < 2^52:
    the decision is one argmax instead of a max, a comparison and a gather over the tied nodes (tens of
    thousands on a large cluster of identical nodes). `exact` says the totals allow it."""

    __slots__ = ("alive", "count", "exact", "key", "key_rank", "network", "prices", "rows", "scored", "total")

    def __init__(self, network: NetworkSnapshot, prices: PriceTable) -> None:
        self.network = network
        self.prices = prices
        self.rows = StampedRows()
        self.reset(0)

    def reset(self, nodes: int) -> None:
        self.total = np.full(nodes, -np.inf)
        self.alive = np.zeros(nodes, dtype=bool)  # what the filters said, kept with `count` passing
        self.count = 0
        self.scored = True
        self.exact = True
        self.key: PackedKeys | None = None
        self.key_rank: np.ndarray | None = None


def _shift(nodes: int) -> float:
    return float(2 ** int(nodes).bit_length())  # > every rank position


def _packable(total: np.ndarray, nodes: int) -> bool:
    """Whether every total is -inf or a whole number small enough to pack with a rank exactly."""
    bound = 2.0**52 / _shift(nodes)
    if total.size <= 16:  # the nodes one decision changed: cheaper than the array operations
        return all(t == -np.inf or (t.is_integer() and abs(t) < bound) for t in total.tolist())
    # A first use covers the whole cluster: whole numbers (floor keeps -inf), and bounded once the -inf
    # are set aside (at most `total.max()` and, below, at least the smallest finite one).
    if not np.array_equal(np.floor(total), total) or not total.max() < bound:
        return False
    low = total.min()
    if low != -np.inf:
        return bool(low > -bound)
    return bool(np.where(total == -np.inf, 0.0, total).min() > -bound)


class PackedKeys:
    """total x 2^k - rank position per node (distinct, so the largest is the single best node) and the
    largest of every block of `BLOCK` nodes: a decision reads the best block, then the best node in it,
    and a change rewrites the blocks of the changed nodes only."""

    BLOCK = 512

    def __init__(self, total: np.ndarray, positions: np.ndarray) -> None:
        nodes = total.size
        self._shift = _shift(nodes)
        blocks = -(-nodes // self.BLOCK)
        self._key = np.full(blocks * self.BLOCK, -np.inf)
        mine = self._key[:nodes]  # total x shift - positions, written in place (no whole-cluster temporaries)
        np.multiply(total, self._shift, out=mine)
        np.subtract(mine, positions, out=mine)
        self._blocks = self._key.reshape(blocks, self.BLOCK).max(axis=1)

    def update(self, rows: np.ndarray, total: np.ndarray, positions: np.ndarray) -> None:
        key = self._key
        new = total * self._shift - positions
        if rows.size <= 16:  # the nodes one decision changed: one by one, cheaper than array operations
            self._update_few(rows.tolist(), new.tolist())
            return
        key[rows] = new
        changed = sorted_unique(rows // self.BLOCK)
        self._blocks[changed] = key.reshape(-1, self.BLOCK)[changed].max(axis=1)

    def _update_few(self, rows: list[int], keys: list[float]) -> None:
        """`update` for a few distinct rows. A block's maximum moves up to a larger new key, and is read
        again only when the key that held it went down (finite keys are distinct, so it held it alone)."""
        key, blocks, size = self._key, self._blocks, self.BLOCK
        reread: set[int] = set()
        for row, new in zip(rows, keys, strict=True):
            block = row // size
            old = key[row]
            key[row] = new
            if new >= blocks[block]:
                blocks[block] = new
            elif old == blocks[block]:
                reread.add(block)
        for block in reread:
            blocks[block] = key[block * size : (block + 1) * size].max()

    def best(self) -> int | None:
        """The node with the largest key; None when every node is ruled out (-inf)."""
        block = int(np.argmax(self._blocks))
        if self._blocks[block] == -np.inf:
            return None
        start = block * self.BLOCK
        return start + int(np.argmax(self._key[start : start + self.BLOCK]))
