"""Per-node state: the latest capacity view, liveness, and the placements holding resources on the node.

Built from full-state snapshots, so a lost or repeated update heals with the next one (ARCHITECTURE §3).
A placement counts as used while the node lists its task, or while it is too recent for the node to have
started it yet; once a snapshot taken well after the placement omits the task, it no longer holds anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from suanli.clock import to_ms
from suanli.metering.domain.capacity import NodeAllocation, NodeCapacity, Resources, capacity_of
from suanli.metering.domain.liveness import Liveness, StatusChange, observe
from suanli.metering.domain.tasks import Placed, Seen
from suanli.metering.domain.usage import Allocation, RatedShare, window_start
from suanli.resources import DeviceCatalogue

# Snapshots a placement may be missing from before it is taken as gone (start-up time, clock skew).
PLACEMENT_GRACE_INTERVALS = 2


class PlacementError(ValueError):
    """A placement that cannot be on this node (a device index the node does not have, a bad share)."""

    reason = "invalid-placement"


@dataclass(frozen=True, slots=True)
class MeteringPolicy:
    reserve: Resources = field(default_factory=Resources)
    default_interval_ms: int = 5_000
    # Republish an unchanged view this often, so a consumer that missed it (broker restart) catches up.
    republish_after_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class NodeState:
    node_id: str
    sequence: int = -1
    occurred_at_ms: int = -1
    capacity: NodeCapacity | None = None
    liveness: Liveness | None = None
    placements: tuple[NodeAllocation, ...] = ()
    running: tuple[str, ...] = ()  # task ids the last snapshot listed
    forwarded: tuple[str, ...] = ()  # placements already rated and handed to the task meter
    published: NodeCapacity | None = None
    published_at_ms: int = -1


@dataclass(frozen=True, slots=True)
class SnapshotOutcome:
    state: NodeState
    stale: bool = False
    capacity: NodeCapacity | None = None  # to publish
    status: StatusChange | None = None
    seen: tuple[Seen, ...] = ()
    placed: tuple[Placed, ...] = ()
    rejected: tuple[tuple[NodeAllocation, str], ...] = field(default_factory=tuple)


def _key(alloc: NodeAllocation) -> str:
    return f"{alloc.task_id}#{alloc.attempt}"


def rate(alloc: NodeAllocation, capacity: NodeCapacity, catalogue: DeviceCatalogue) -> Placed:
    """The placement with each device share priced in CU, from the models the node reports."""
    devices = {d.index: d for d in capacity.devices}
    shares = []
    for share in alloc.devices:
        device = devices.get(share.index)
        if device is None:
            raise PlacementError(f"{alloc.node_id} has no device {share.index} (task {alloc.task_id})")
        if not 0 < share.milli <= 1000:
            raise PlacementError(f"share {share.milli} of device {share.index} is outside 1..1000")
        cu = catalogue.cu_of(device.model, share.milli)
        shares.append(RatedShare(share.index, share.milli, device.device_class, cu))
    allocation = Allocation(alloc.node_id, tuple(shares), alloc.cpu_milli, catalogue.cpu_cu(alloc.cpu_milli))
    return Placed(alloc.task_id, alloc.job_id, alloc.attempt, allocation)


def on_snapshot(
    state: NodeState | None,
    snapshot: Mapping[str, Any],
    *,
    received_at_ms: int,
    catalogue: DeviceCatalogue,
    policy: MeteringPolicy | None = None,
) -> SnapshotOutcome:
    node_id = snapshot["node_id"]
    state = state or NodeState(node_id)
    policy = policy or MeteringPolicy()
    occurred = to_ms(snapshot["occurred_at"])
    sequence = snapshot["sequence"]
    if sequence <= state.sequence and occurred <= state.occurred_at_ms:
        # A duplicate or an older snapshot; an agent restart resets its sequence but not its clock.
        return SnapshotOutcome(state, stale=True)
    interval = snapshot.get("report_interval_ms") or policy.default_interval_ms
    running = tuple(dict.fromkeys(snapshot.get("task_ids") or ()))
    listed = set(running)
    horizon = occurred - PLACEMENT_GRACE_INTERVALS * interval
    holding = tuple(p for p in state.placements if p.task_id in listed or p.placed_at_ms > horizon)
    capacity = capacity_of(snapshot, holding, catalogue, reserve=policy.reserve)
    liveness, status = observe(
        state.liveness, node_id, occurred_at_ms=occurred, received_at_ms=received_at_ms, interval_ms=interval
    )
    # Every placement not yet rated is rated now, including one that no longer holds room (metering was
    # down, or the node was unknown, until after the task ran): its charge is owed all the same.
    placed, rejected, forwarded = [], [], []
    for alloc in state.placements:
        if _key(alloc) in state.forwarded:
            forwarded.append(_key(alloc))
            continue
        try:
            placed.append(rate(alloc, capacity, catalogue))
            forwarded.append(_key(alloc))
        except PlacementError as exc:
            rejected.append((alloc, str(exc)))
    kept = tuple(p for p in holding if _key(p) in forwarded)
    forwarded = [k for k in forwarded if k in {_key(p) for p in kept}]
    # Evidence only matters at window granularity (a running task is metered up to the start of the
    # window its latest evidence falls in), so one Seen per task per window is enough to forward.
    new_window = window_start(occurred) != window_start(state.occurred_at_ms)
    before = set(state.running)

    def news(task_id: str) -> bool:
        return new_window or task_id not in before

    if rejected:
        # Its devices are not on the node: it cannot hold them, so the view must not count it.
        capacity = capacity_of(snapshot, kept, catalogue, reserve=policy.reserve)
    due = received_at_ms - state.published_at_ms >= policy.republish_after_ms
    publish = due or capacity != state.published
    new_state = replace(
        state,
        sequence=sequence,
        occurred_at_ms=occurred,
        capacity=capacity,
        liveness=liveness,
        placements=kept,
        running=running,
        forwarded=tuple(forwarded),
        published=capacity if publish else state.published,
        published_at_ms=received_at_ms if publish else state.published_at_ms,
    )
    return SnapshotOutcome(
        new_state,
        capacity=capacity if publish else None,
        status=status,
        seen=tuple(Seen(task_id, node_id, occurred) for task_id in running if news(task_id)),
        placed=tuple(placed),
        rejected=tuple(rejected),
    )


def newest_per_node(snapshots: Sequence[Mapping[str, Any]]) -> list[int]:
    """Of snapshots read together, the positions of those to apply, in order: each node's newest.

    A snapshot is full state, so an older one of the same node read in the same batch changes nothing
    the newer does not set again: the view, liveness and the placements it confirms follow the newest.
    Newest by the agent's own stamp, then by position (a restarted agent's sequence starts over, its
    clock does not; a redelivered copy is the same record). While metering works through a backlog a
    batch holds several snapshots of each node, and this is what keeps its cost per record falling as
    its lag grows instead of the lag feeding on itself.
    """
    newest: dict[str, int] = {}
    for i, snapshot in enumerate(snapshots):
        held = newest.get(snapshot["node_id"])
        if held is None or to_ms(snapshot["occurred_at"]) >= to_ms(snapshots[held]["occurred_at"]):
            newest[snapshot["node_id"]] = i
    return sorted(newest.values())


def on_placed(
    state: NodeState | None, alloc: NodeAllocation, *, catalogue: DeviceCatalogue
) -> tuple[NodeState, Placed | None]:
    """Record a placement; it is rated at once if the node's devices are known, else at the next snapshot.

    Raises ``PlacementError`` for a placement that cannot be on the node as last reported.
    """
    state = state or NodeState(alloc.node_id)
    others = tuple(p for p in state.placements if _key(p) != _key(alloc))
    if state.capacity is None:
        return replace(state, placements=(*others, alloc)), None
    placed = rate(alloc, state.capacity, catalogue)
    forwarded = tuple(dict.fromkeys((*state.forwarded, _key(alloc))))
    return replace(state, placements=(*others, alloc), forwarded=forwarded), placed


def on_preempted(state: NodeState | None, task_id: str, attempt: int) -> NodeState | None:
    """The scheduler took the resources back: they stop counting as used at once."""
    if state is None:
        return None
    gone = f"{task_id}#{attempt}"
    return replace(
        state,
        placements=tuple(p for p in state.placements if _key(p) != gone),
        forwarded=tuple(k for k in state.forwarded if k != gone),
    )


def with_liveness(state: NodeState, liveness: Liveness) -> NodeState:
    return replace(state, liveness=liveness)


def _lasting(state: NodeState) -> tuple[object, ...]:
    live = state.liveness
    return (
        state.placements,
        state.forwarded,
        state.published,
        state.published_at_ms,
        None if live is None else (live.status, live.interval_ms),
    )


def material_node_change(before: NodeState | None, after: NodeState) -> bool:
    """Whether ``after`` differs from ``before`` in what no later snapshot restores.

    A snapshot of an unchanged node moves only its stamps (sequence, times, the capacity it recomputes,
    the task ids it lists): lost in a restart, the node's next snapshot sets them again. Placements,
    what was forwarded and published, and the status are history no snapshot carries.
    """
    return before is None or _lasting(before) != _lasting(after)
