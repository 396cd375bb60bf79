"""The use cases: a snapshot, a placement, a preemption, a task fact, and the periodic liveness check.

Each applies one input to the state the batch holds and adds what it produces to the batch's outputs;
none publishes or writes itself, so a batch's outputs can be acknowledged before any of its states is
written (see `ports.Batch`). Times come from the injected clock, in integer UTC milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from suanli.clock import MillisClock, StreamTimes, to_ms
from suanli.metering.domain import (
    Ended,
    MeteringPolicy,
    NodeAllocation,
    NodeState,
    NodeStatus,
    StatusChange,
    Summary,
    TaskFact,
    check,
    late,
    material_node_change,
    material_task_change,
    on_placed,
    on_preempted,
    on_snapshot,
    prunable,
    remeter,
    step,
    summarise,
    with_liveness,
)
from suanli.metering.service_layer.ports import Batch, TaskCounters
from suanli.resources import DeviceCatalogue

log = logging.getLogger(__name__)


class Metering:
    def __init__(
        self,
        *,
        clock: MillisClock,
        catalogue: DeviceCatalogue,
        policy: MeteringPolicy,
        lost_after: int,
        task_retention_ms: int,
        counters: TaskCounters,
    ) -> None:
        self.clock = clock
        # Finished task records are pruned this long after their end; facts older than this about an
        # attempt no record holds as started are refused (see suanli.metering.domain.tasks).
        self.task_retention_ms = task_retention_ms
        self.counters = counters
        self.catalogue = catalogue
        self.policy = policy
        self.lost_after = lost_after
        # Per snapshot partition, per worker, in memory: partitions are read at their own pace, so a node
        # is judged on how far its own partition has been read. After a restart: the wall clock until
        # snapshots flow.
        self.streams = StreamTimes()
        self.partition_of: dict[str, int | None] = {}
        self._reading: frozenset[int] | None = None  # the snapshot partitions last judged

    # -- node side --------------------------------------------------------------------------------------

    def apply_snapshot(
        self,
        snapshot: Mapping[str, Any],
        batch: Batch,
        record_ms: int | None = None,
        partition: int | None = None,
    ) -> None:
        """A full-state NodeSnapshot: the capacity view (when changed or due), liveness, task evidence.

        ``record_ms``: the record's Kafka timestamp, which advances the stream's time (capped at our clock,
        so a producer clock running ahead cannot push it into the future); the node counts as heard at
        the later of it and the agent's own stamp (capped likewise): a broker that reports a batch's
        first timestamp for all its records must not make a node look older than it is. ``partition``:
        the snapshot partition it was read from, whose stream time the node's deadline runs on.

        A node is never heard earlier than the stream's time once its record is read: an agent whose clock
        runs behind stamps its records in the past (CreateTime, and ``occurred_at``), yet it reported now,
        among records of the partition stamped by correct clocks. Judged on its own stamps it would look
        silent by its skew and flap LOST."""
        node_id = snapshot["node_id"]
        now = self.clock()
        recorded = now if record_ms is None else min(record_ms, now)
        self.streams.read(partition, recorded, now)
        stamped = max(recorded, to_ms(snapshot["occurred_at"]))
        heard = min(max(stamped, self.streams.newest(partition)), now)
        self.partition_of[node_id] = partition
        before = batch.nodes.get(node_id)
        out = on_snapshot(
            before,
            snapshot,
            received_at_ms=heard,
            catalogue=self.catalogue,
            policy=self.policy,
        )
        if out.stale:
            return
        for alloc, reason in out.rejected:
            log.error("placement of %s attempt %d dropped: %s", alloc.task_id, alloc.attempt, reason)
        if out.capacity is not None:
            batch.outputs.capacity_changed(
                out.capacity,
                source_event_id=snapshot["event_id"],
                occurred_at_ms=to_ms(snapshot["occurred_at"]),
            )
        if out.status is not None:
            self._status_changed(out.status, batch)
        batch.outputs.task_facts((*out.placed, *out.seen))
        batch.nodes.put(node_id, out.state, lasting=material_node_change(before, out.state))

    def apply_placement(self, allocation: NodeAllocation, batch: Batch) -> None:
        """A TaskPlaced: held on its node, priced at once if the node's devices are known.

        Raises ``PlacementError`` for a placement that cannot be on the node as last reported.
        """
        state, placed = on_placed(batch.nodes.get(allocation.node_id), allocation, catalogue=self.catalogue)
        if placed is not None:
            batch.outputs.task_facts([placed])
        batch.nodes.put(allocation.node_id, state)

    def apply_preemption(self, node_id: str, ended: Ended, batch: Batch) -> None:
        """A TaskPreempted: the attempt's charge stops now, and its resources stop counting as used."""
        batch.outputs.task_facts([ended])
        after = on_preempted(batch.nodes.get(node_id), ended.task_id, ended.attempt)
        if after is not None:
            batch.nodes.put(node_id, after)

    def reading(self, partitions: frozenset[int], recovering: bool) -> None:
        """The snapshot partitions this worker reads now, before a liveness check.

        On a change (the worker started, or a rebalance moved partitions) and while its tables are still
        being recovered, the nodes it holds were last heard before a gap whose snapshots it has not read
        yet: the silence is its own backlog, so the stream times restart, and a partition not read since
        is judged only once a whole timeout passed without its records.
        """
        if recovering or partitions != self._reading:
            self._reading = partitions
            self.streams.restart(self.clock())

    def check_liveness(
        self,
        batch: Batch,
        owns: Callable[[str], bool],
        behind: Collection[int] = frozenset(),
        heard: Mapping[int | None, int | None] | None = None,
    ) -> Summary:
        """Nodes silent for ``lost_after`` of their intervals become Lost; the summary the gauges show.

        Only nodes ``owns`` says this worker checks (their snapshot partitions are its own) can change,
        so with several workers each node is declared Lost once; the summary covers every node held.
        ``behind``: snapshot partitions whose records at the broker this worker has not all handled yet;
        a node there is judged only at the time of what has been read from its partition, never at the
        wall clock, since its next snapshot may be waiting in that backlog.
        ``heard``: per snapshot partition, when the broker last answered this worker's fetch of it (None:
        never). While the broker has not answered for half the timeout, and at least 2 s (down,
        restarting, out of reach), the nodes there are not judged, nor for a whole timeout after it
        answers again (`StreamTimes.judge`): metering cut off from the broker is no sign that the nodes are.
        """
        states = [s for s in (batch.nodes.get(n) for n in list(batch.nodes.keys())) if s is not None]
        longest = max((s.liveness.interval_ms for s in states if s.liveness), default=0)
        quiet = self.lost_after * (longest or self.policy.default_interval_ms)
        wall = self.clock()
        time_of = self.streams.judge(wall, quiet, behind, heard)
        checked: list[NodeState] = []
        for state in states:
            node_id = state.node_id
            if state.liveness is not None and owns(node_id):
                now = time_of(self.partition_of.get(node_id))
                if now is None:  # its partition is not judged yet
                    checked.append(state)
                    continue
                after, change = check(state.liveness, now, lost_after=self.lost_after)
                if change is not None:
                    self._status_changed(change, batch)
                    state = with_liveness(state, after)
                    batch.nodes.put(node_id, state)
            checked.append(state)
        return summarise(
            (s.capacity, s.liveness.status if s.liveness else NodeStatus.UNKNOWN)
            for s in checked
            if s.capacity is not None
        )

    def _status_changed(self, change: StatusChange, batch: Batch) -> None:
        log.info("node %s: %s -> %s (%s)", change.node_id, change.previous, change.status, change.reason)
        batch.outputs.status_changed(change)

    # -- task side --------------------------------------------------------------------------------------

    def forward_facts(self, facts: Iterable[TaskFact], batch: Batch) -> None:
        """Facts read from a lifecycle event, a usage sample or a submitted job, for the task's owner."""
        batch.outputs.task_facts(facts)

    def apply_fact(self, fact: TaskFact, batch: Batch) -> None:
        """One fact about a task, folded into its record; the usage windows that became chargeable.

        A fact from before the retention about an attempt no record holds as started is ignored, with
        its reason logged and counted: its task's record was pruned, and applying it could charge the
        attempt a second time.
        """
        now = self.clock()
        held = batch.tasks.get(fact.task_id)
        if late(held, fact, now - self.task_retention_ms):
            kind = type(fact).__name__
            log.info(
                "%s of task %s ignored: older than the task retention (%d s) and its attempt is not held"
                " (the record was pruned); applying it could charge the attempt twice",
                kind,
                fact.task_id,
                self.task_retention_ms // 1000,
            )
            self.counters.late_fact(kind)
            return
        state, windows = step(held, fact)
        for window in windows:
            batch.outputs.usage_metered(window)
        batch.tasks.put(
            fact.task_id, replace(state, last_fact_ms=now), lasting=material_task_change(held, state)
        )

    def remeter_tasks(self, batch: Batch, owns: Callable[[str], bool]) -> int:
        """Every usage window of the task records ``owns`` says are this worker's, published again; how many.

        After the broker started over (`domain.tasks.remeter`): the windows it held and billing had not
        read are gone with it. Billing refuses the copies of those it has.
        """
        published = 0
        for task_id in list(batch.tasks.keys()):
            held = batch.tasks.get(task_id)
            if held is None or not owns(task_id):
                continue
            state, windows = remeter(held)
            for window in windows:
                batch.outputs.usage_metered(window)
            published += len(windows)
            if state != held:
                batch.tasks.put(task_id, state, lasting=material_task_change(held, state))
        return published

    def prune_tasks(self, batch: Batch, owns: Callable[[str], bool], limit: int) -> int:
        """Drop at most ``limit`` task records past the retention (`domain.prunable`); how many were.

        Only records ``owns`` says are this worker's (their partitions are its own) are looked at.
        """
        horizon = self.clock() - self.task_retention_ms
        pruned = 0
        for task_id in list(batch.tasks.keys()):
            if pruned >= limit:
                break
            if not owns(task_id):
                continue
            state = batch.tasks.get(task_id)
            if state is not None and prunable(state, horizon):
                batch.tasks.delete(task_id)
                pruned += 1
        if pruned:
            self.counters.pruned(pruned)
        return pruned
