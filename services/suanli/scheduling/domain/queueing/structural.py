"""Reasons a job can never be placed on this cluster as it is, whatever runs or ends: its network
constraint rules out every region it could use, a task of its gang fits no node of the regions it may use
even with the node empty, or its gang (kept to one region) exceeds what any single region has in total.
The cycle asks before quota, so such a job is not reported as short of quota, and the answer depends only
on the nodes and the network, so it stays the same from cycle to cycle until a node joins or leaves.

Only clusters of several regions are judged for region size: in one region a gang too big for it is
what it was before regions were chosen (no node fits, or the gang is incomplete).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from suanli.scheduling.domain.model import GPU_MILLI, Job, Locality, Node, TaskRequest
from suanli.scheduling.domain.network import NetworkSnapshot, region_exclusions
from suanli.scheduling.domain.queueing.reasons import NetworkConstraint, NoRegionFits, Unschedulable

Structural = NetworkConstraint | NoRegionFits | Unschedulable


@dataclass(frozen=True, slots=True)
class _Totals:
    gpu_milli: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a node could hold when empty. Fleets have few distinct shapes (a node group is one shape), so
    a task is judged against the shapes, each standing for the first node of it (by the nodes' order)."""

    node: str
    gpu_model: str | None
    gpus: int
    cpu_milli: int
    memory_mib: int
    labels: frozenset[tuple[str, str]]
    count: int  # nodes of this shape


@dataclass(frozen=True, slots=True)
class _Short:
    """Why no shape holds a task: the first constraint the shapes fail and the most they have of it."""

    resource: str
    requested: str
    largest: str
    node: str
    detail: str


# What makes two nodes the same shape: region, GPU model, GPUs, CPU, memory and labels.
_Key = tuple[str, str | None, int, int, int, tuple[tuple[str, str], ...]]
_Verdict = tuple[_Short, tuple[tuple[str, str], ...]]  # overall, then per region


class StructuralCheck:
    def __init__(self, nodes: tuple[Node, ...], network: NetworkSnapshot) -> None:
        self._nodes = nodes
        self._network = network
        self._regions = tuple(sorted({n.region for n in nodes}))
        self._totals: dict[str, _Totals] | None = None  # per region, computed when first needed
        self._shapes: dict[str, tuple[_Shape, ...]] | None = None  # per region, computed when first needed
        # Per (request, regions the network rules out): look-alike jobs are judged once per cycle.
        self._verdicts: dict[tuple[TaskRequest, frozenset[str]], _Verdict | None] = {}

    def reason(self, job: Job) -> Structural | None:
        if not job.tasks or not self._regions:
            return None
        first = job.tasks[0].request
        requests = [t.request for t in job.tasks[: job.gang_size]]
        allowed = [r for r in self._regions if all(not q.regions or r in q.regions for q in requests)]
        ruled_out: dict[str, str] = {}
        if first.data_region:
            why = region_exclusions(self._network, first, self._regions)
            ruled_out = {r: w for r, w in zip(self._regions, why, strict=True) if w is not None}
            if allowed and all(r in ruled_out for r in allowed):
                return NetworkConstraint(
                    first.data_region, first.max_rtt_ms, tuple((r, ruled_out[r]) for r in allowed)
                )
        unschedulable = self._unschedulable(job, ruled_out)
        if unschedulable is not None:
            return unschedulable
        allowed = [r for r in allowed if r not in ruled_out]
        if not allowed:
            return None  # the region filter says so, as before
        if job.placement_locality is Locality.ANY or len(self._regions) < 2:
            return None
        return self._too_big(job, requests, allowed)

    def _unschedulable(self, job: Job, ruled_out: dict[str, str]) -> Unschedulable | None:
        """The first task that no node could hold, when fewer tasks than the gang needs could be held."""
        holdable = 0
        found: tuple[str, _Verdict] | None = None
        excluded = frozenset(ruled_out)
        for task in job.tasks:
            key = (task.request, excluded)
            if key not in self._verdicts:
                self._verdicts[key] = self._verdict(task.request, ruled_out)
            verdict = self._verdicts[key]
            if verdict is None:
                holdable += 1
                if holdable >= job.gang_size:
                    return None
            elif found is None:
                found = (task.id, verdict)
        if found is None:
            return None
        task_id, (short, regions) = found
        return Unschedulable(
            task_id, short.resource, short.requested, short.largest, short.node, short.detail, regions
        )

    def _verdict(self, request: TaskRequest, ruled_out: dict[str, str]) -> _Verdict | None:
        shapes = self._region_shapes()
        named = request.regions or self._regions
        usable = [r for r in named if r in shapes and r not in ruled_out]
        overall = (
            _short([s for r in usable for s in shapes[r]], request)
            if usable
            else _no_region(request, self._regions, [r for r in named if r in ruled_out])
        )
        if overall is None:
            return None
        regions = []
        for region in named:
            if region in ruled_out:
                regions.append((region, ruled_out[region]))
            elif region not in shapes:
                regions.append((region, "no nodes"))
            else:
                short = _short(shapes[region], request)
                assert short is not None  # the region's shapes are among the ones that failed above
                regions.append((region, short.detail))
        return overall, tuple(regions)

    def _region_shapes(self) -> dict[str, tuple[_Shape, ...]]:
        if self._shapes is None:
            # The one pass over the nodes (region totals come from it too): a key of plain fields per node,
            # a shape per distinct key.
            first: dict[_Key, str] = {}
            counts: dict[_Key, int] = {}
            for n in self._nodes:
                devices = n.gpus
                model = devices[0].model if devices else None
                key = (n.region, model, len(devices), n.cpu_milli, n.memory_mib, n.labels)
                count = counts.get(key)
                if count is None:
                    first[key] = n.id
                    counts[key] = 1
                else:
                    counts[key] = count + 1
            per_region: dict[str, list[_Shape]] = {}
            for key, count in counts.items():
                region, model, gpus, cpu, memory, labels = key
                shape = _Shape(first[key], model, gpus, cpu, memory, frozenset(labels), count)
                per_region.setdefault(region, []).append(shape)
            self._shapes = {region: tuple(shapes) for region, shapes in per_region.items()}
        return self._shapes

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
            self._totals = {
                region: _Totals(
                    sum(GPU_MILLI * s.gpus * s.count for s in shapes),
                    sum(s.cpu_milli * s.count for s in shapes),
                    sum(s.memory_mib * s.count for s in shapes),
                )
                for region, shapes in self._region_shapes().items()
            }
        return self._totals


def _no_region(request: TaskRequest, regions: Iterable[str], ruled_out: list[str]) -> _Short:
    """No region the task may use has nodes: it names only regions without nodes, or the network rules
    out the rest (`ruled_out`: those of the regions it names)."""
    wanted = ", ".join(request.regions) if request.regions else "any region"
    where = ", ".join(regions) or "none"
    detail = f"no node in {wanted}"
    if ruled_out:
        detail += f" that the network constraint allows ({', '.join(ruled_out)} ruled out)"
    return _Short("region", wanted, where, "", f"{detail}; regions with nodes: {where}")


def _short(shapes: list[_Shape] | tuple[_Shape, ...], request: TaskRequest) -> _Short | None:
    """The first constraint no shape meets, narrowing the shapes constraint by constraint (labels, GPU
    model, GPUs per node, CPU, memory), so that "the most" is always among nodes that meet the earlier
    ones. None when some shape holds the task."""
    within: list[str] = []  # what the remaining shapes have in common, for the messages
    if request.node_selector:
        labels = ", ".join(f"{k}={v}" for k, v in request.node_selector)
        wanted = frozenset(request.node_selector)
        shapes = [s for s in shapes if wanted <= s.labels]
        if not shapes:
            return _Short("node_selector", labels, "", "", f"no node has the labels {labels}")
        within.append(f"labels {labels}")
    if request.gpu_count:
        kind = f" {' or '.join(request.gpu_models)}" if request.gpu_models else ""
        if request.gpu_models:
            models = " or ".join(request.gpu_models)
            matching = [s for s in shapes if s.gpu_model in request.gpu_models]
            if not matching:
                there = ", ".join(sorted({s.gpu_model for s in shapes if s.gpu_model})) or "none"
                return _Short(
                    "gpu_model", models, there, "", f"no node has {models} GPUs (GPU models: {there})"
                )
            shapes = matching
        need = 1 if request.is_shared_gpu else request.gpu_count
        best = _most(shapes, _gpus)
        if best.gpus < need:
            return _Short(
                "gpu",
                str(need),
                str(best.gpus),
                best.node,
                f"asks for {need}{kind} GPUs on one node; "
                f"the largest{kind} node has {best.gpus} ({best.node})",
            )
        shapes = [s for s in shapes if s.gpus >= need]
        within.append(f"{need}+{kind} GPUs")
    for resource, unit, want, have in (
        ("cpu", "milli-CPU", request.cpu_milli, _cpu),
        ("memory", "MiB of memory", request.memory_mib, _memory),
    ):
        best = _most(shapes, have)
        if have(best) < want:
            ctx = f" with {', '.join(within)}" if within else ""
            return _Short(
                resource,
                str(want),
                str(have(best)),
                best.node,
                f"asks for {want} {unit}; the largest node{ctx} has {have(best)} ({best.node})",
            )
        shapes = [s for s in shapes if have(s) >= want]
    return None


def _gpus(shape: _Shape) -> int:
    return shape.gpus


def _cpu(shape: _Shape) -> int:
    return shape.cpu_milli


def _memory(shape: _Shape) -> int:
    return shape.memory_mib


def _most(shapes: list[_Shape] | tuple[_Shape, ...], of: Callable[[_Shape], int]) -> _Shape:
    return max(shapes, key=of)  # the first of the largest: the nodes' order decides ties
