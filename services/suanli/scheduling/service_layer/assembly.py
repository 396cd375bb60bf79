"""The scheduler's service-layer objects wired together: the write lock, the job commands, the cycle
runner and the cycle loop, and the lost nodes' evictions. Adapters (writer, placer, metrics) come in
from `bootstrap`; unit tests pass in-memory ones and get the same wiring."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from suanli.clock import Clock, IdFactory
from suanli.scheduling.domain.jobs import DEFAULT_LOST_FENCE, DEFAULT_WAVE_SIZE
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.queueing import CycleConfig
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.cycle_loop import CycleLoop
from suanli.scheduling.service_layer.cycle_runner import CycleRunner, PlacerFactory
from suanli.scheduling.service_layer.disruption import (
    DEFAULT_LOST_CONFIRM,
    DEFAULT_LOST_SETTLE,
    DEFAULT_THRESHOLD,
    LostNodeEvictions,
)
from suanli.scheduling.service_layer.envelopes import Envelopes
from suanli.scheduling.service_layer.job_commands import JobCommands
from suanli.scheduling.service_layer.ports import Metrics, NoMetrics, Writer
from suanli.scheduling.service_layer.projection import Projection
from suanli.scheduling.service_layer.write_lock import WriteLock


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The scheduling service's use-case objects, one purpose each."""

    write_lock: WriteLock
    commands: JobCommands
    cycles: CycleRunner
    loop: CycleLoop
    evictions: LostNodeEvictions


def assemble(
    writer: Writer,
    projection: Projection,
    capacity: CapacityView,
    placer_factory: PlacerFactory,
    *,
    clock: Clock,
    ids: IdFactory,
    producer: str = "scheduling",
    cycle_config: CycleConfig | None = None,
    interval_s: float = 1.0,
    min_cycle_gap_s: float = 0.0,
    reconcile_grace: timedelta = timedelta(seconds=15),
    disruption_threshold: float = DEFAULT_THRESHOLD,
    metrics: Metrics | None = None,
    is_leader: Callable[[], bool] = lambda: True,
    eager_cycles: bool = False,
    network: Callable[[], NetworkSnapshot] = lambda: EMPTY_NETWORK,
    wave_size: int = DEFAULT_WAVE_SIZE,
    lost_confirm: timedelta = DEFAULT_LOST_CONFIRM,
    lost_fence: timedelta = DEFAULT_LOST_FENCE,
    lost_settle: timedelta = DEFAULT_LOST_SETTLE,
) -> Scheduling:
    """`eager_cycles`: the group commit runs the cycle itself after every batch that woke it, so a
    submit is placed within one batch and one cycle of arriving (the running service); without it
    cycles run only when asked (`cycles.run()`, or the loop), as the unit tests drive them.
    `min_cycle_gap_s`: the least time between the starts of two cycles that place (`CycleLoop`)."""
    metrics = metrics or NoMetrics()
    write_lock = WriteLock(writer, projection, is_leader=is_leader)
    envelopes = Envelopes(clock, ids, producer)
    cycles = CycleRunner(
        write_lock,
        projection,
        capacity,
        placer_factory,
        envelopes,
        clock=clock,
        config=cycle_config,
        metrics=metrics,
        network=network,
        wave_size=wave_size,
        lost_fence=lost_fence,
    )
    loop = CycleLoop(cycles, interval_s, min_cycle_gap_s)
    commands = JobCommands(
        writer,
        write_lock,
        projection,
        capacity,
        envelopes,
        clock=clock,
        ids=ids,
        cycle_number=lambda: cycles.count,
        wake_cycle=loop.wake,
        reconcile_grace=reconcile_grace,
        metrics=metrics,
        between_batches=loop.turn_if_woken if eager_cycles else None,
    )
    evictions = LostNodeEvictions(
        capacity,
        projection,
        commands.handle,
        clock=clock,
        threshold=disruption_threshold,
        confirm_after=lost_confirm,
        settle=lost_settle,
    )
    return Scheduling(write_lock, commands, cycles, loop, evictions)
