"""Wiring of the scheduling service: the only place that picks adapters for ports."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from suanli.clock import SystemClock, uuid4_factory
from suanli.eventstore import PostgresEventStore, PostgresSnapshots
from suanli.scheduling.adapters.framework_placer import FrameworkPlacer, workload_typical
from suanli.scheduling.adapters.leader import LeaderElection
from suanli.scheduling.adapters.metrics import OtelMetrics
from suanli.scheduling.adapters.pending import PostgresPendingReasons
from suanli.scheduling.adapters.pricebook import load_prices
from suanli.scheduling.adapters.store import StoreWriter
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import CycleConfig
from suanli.scheduling.service_layer.assembly import Scheduling, assemble
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.network import NetworkView
from suanli.scheduling.service_layer.projection import Projection
from suanli.scheduling.service_layer.projection_snapshot import Snapshotter, load_projection


@dataclass
class Components:
    store: PostgresEventStore
    writer: StoreWriter
    leader: LeaderElection
    capacity: CapacityView
    network: NetworkView
    projection: Projection
    scheduler: Scheduling
    explain: Callable[..., Any]
    snapshotter: Snapshotter


async def bootstrap(config: Any) -> Components:
    """`config` is a `SchedulingSettings`. Unknown policy: refuse to start (ProfileError / KeyError)."""
    profile = policy_profile(config.policy)
    store = await PostgresEventStore.connect(config.dsn, schema=config.store_schema)
    leader = LeaderElection(
        config.dsn, config.store_schema, poll_s=config.standby_poll_s, lease_s=config.leader_lease_s
    )
    writer = StoreWriter(
        store, PostgresPendingReasons(store.pool, store.schema), leader, topic_prefix=config.topic_prefix
    )
    await writer.setup()
    # From the latest snapshot when there is one: only the events after it are folded.
    snapshots = PostgresSnapshots(store.pool, store.schema)
    projection = await load_projection(snapshots, config.retention())
    loaded_at = projection.position
    await writer.catch_up(projection)
    await writer.load_pending(projection)
    clock = SystemClock()
    capacity = CapacityView(clock)
    network = NetworkView(clock)
    prices = load_prices(clock.now())

    last: list[FrameworkPlacer] = []

    def placer(requests: Sequence[Any], cycle: int) -> FrameworkPlacer:
        made = FrameworkPlacer(
            profile,
            workload_typical(requests),
            config.seed,
            cycle,
            last[-1] if last else None,
            network=network.snapshot(),
            prices=prices,
        )
        last[:] = [made]
        return made

    metrics = OtelMetrics()
    metrics.watch_network(network.age_s)
    metrics.watch_capacity(capacity.age_s)
    metrics.watch_leader(lambda: leader.is_leader)
    scheduler = assemble(
        writer,
        projection,
        capacity,
        placer,
        clock=clock,
        ids=uuid4_factory,
        producer=f"scheduling/{config.instance}",
        cycle_config=CycleConfig(overcommit_ratio=config.overcommit_ratio),
        interval_s=config.interval_s,
        min_cycle_gap_s=config.min_cycle_gap_s,
        reconcile_grace=timedelta(seconds=config.reconcile_grace_s),
        disruption_threshold=config.disruption_threshold,
        metrics=metrics,
        is_leader=lambda: leader.is_leader,
        eager_cycles=True,
        network=network.snapshot,
        wave_size=config.wave_size,
        lost_confirm=timedelta(seconds=config.lost_confirm_s),
        lost_fence=timedelta(seconds=config.lost_fence_s),
        lost_settle=timedelta(seconds=config.lost_settle_s),
    )

    def explain(nodes: Any, job: Any) -> Any:
        requests = [t.request() for j in projection.jobs.values() if not j.phase.final for t in j.spec.tasks]
        return FrameworkPlacer(
            profile,
            workload_typical(requests),
            config.seed,
            scheduler.cycles.count,
            network=network.snapshot(),
            prices=prices,
        ).explain(nodes, job)

    snapshotter = Snapshotter(projection, snapshots, keep=config.snapshots_kept, position=loaded_at)
    return Components(store, writer, leader, capacity, network, projection, scheduler, explain, snapshotter)
