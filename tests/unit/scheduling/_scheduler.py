"""The scheduler's service layer as the running service wires it, over the real writer on the in-memory
event store: no broker, no database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from suanli.clock import ManualClock
from suanli.eventstore import InMemoryEventStore, StreamAppend, Transaction
from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.adapters.pending import InMemoryPendingReasons
from suanli.scheduling.adapters.store import StoreWriter, Unfenced
from suanli.scheduling.domain.jobs import DEFAULT_WAVE_SIZE
from suanli.scheduling.domain.queueing import Placer, PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.service_layer.assembly import Scheduling, assemble
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import SeedQueues
from suanli.scheduling.service_layer.cycle_runner import PlacerFactory
from suanli.scheduling.service_layer.ports import Metrics
from suanli.scheduling.service_layer.projection import Projection, decode_payload
from suanli.scheduling.service_layer.queues_config import QueueConfig

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class _CountedTransaction:
    def __init__(self, tx: Transaction, commits: list[int]) -> None:
        self._tx = tx
        self._commits = commits

    @property
    def connection(self) -> Any:
        return self._tx.connection

    async def append(self, *args: Any, **kwargs: Any) -> int:
        return await self._tx.append(*args, **kwargs)

    async def append_many(self, appends: Sequence[StreamAppend]) -> list[int]:
        versions = await self._tx.append_many(appends)
        self._commits.append(len(appends))
        return versions


class CountingStore(InMemoryEventStore):
    """The in-memory store, noting how many streams each unit of work appended to (a group commit's
    batch is one unit)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=clock)
        self.commits: list[int] = []

    @asynccontextmanager
    async def transaction(self, *, appending: bool = False) -> AsyncIterator[_CountedTransaction]:  # type: ignore[override]
        async with super().transaction(appending=appending) as tx:
            yield _CountedTransaction(tx, self.commits)


@dataclass
class Harness:
    scheduler: Scheduling
    store: CountingStore
    writer: StoreWriter
    projection: Projection
    capacity: CapacityView
    clock: ManualClock

    async def recorded(self) -> list[tuple[str, dict[str, Any]]]:
        """Every event recorded, in commit order, as (name, record)."""
        return [(e.event_name, decode_payload(e)) for e in await self.store.read_all()]

    async def names(self) -> list[str]:
        return [name for name, _ in await self.recorded()]

    async def configure(self, *queues: QueueSpec) -> None:
        """Queues (default: `acme` with four A100s) and one priority class, `high`."""
        wanted = queues or (QueueSpec("acme", (ResourceQuota("gpu:A100", 4000),)),)
        await self.scheduler.commands.handle(SeedQueues(QueueConfig(wanted, (PriorityClass("high", 10),))))


def fgdx(requests: Any, cycle: int) -> Placer:
    return FrameworkPlacer.for_policy("fgdx", DEFAULT_TYPICAL)


def harness(
    *,
    eager_cycles: bool = False,
    placer_factory: PlacerFactory = fgdx,
    metrics: Metrics | None = None,
    interval_s: float = 1.0,
    min_cycle_gap_s: float = 0.0,
    nodes: tuple[str, ...] = ("n1", "n2"),
    is_leader: Callable[[], bool] = lambda: True,
    wave_size: int = DEFAULT_WAVE_SIZE,
    lost_settle: timedelta = timedelta(0),
) -> Harness:
    """``lost_settle``: none by default, so a test that marks a node Lost sees it evicted at the next
    sweep; the settling itself is tested on its own (test_service_disruption.py)."""
    clock = ManualClock(T0)
    store = CountingStore(clock)
    writer = StoreWriter(store, InMemoryPendingReasons(), Unfenced())
    projection, capacity = Projection(), CapacityView()
    for node in nodes:
        capacity.on_capacity(
            {
                "node_id": node,
                "region": "r",
                "zone": "z",
                "site": "s",
                "allocatable": {"cpu_milli": 64000, "memory_mib": 262144},
                "devices": [{"index": i, "model": "A100", "memory_total_mib": 1} for i in range(2)],
            }
        )
    scheduler = assemble(
        writer,
        projection,
        capacity,
        placer_factory,
        clock=clock,
        ids=uuid.uuid4,
        reconcile_grace=timedelta(seconds=5),
        metrics=metrics,
        interval_s=interval_s,
        min_cycle_gap_s=min_cycle_gap_s,
        is_leader=is_leader,
        eager_cycles=eager_cycles,
        wave_size=wave_size,
        lost_settle=lost_settle,
    )
    return Harness(scheduler, store, writer, projection, capacity, clock)
