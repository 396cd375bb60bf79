"""Runs scheduling cycles: the projection and the capacity view in, placements and preemptions recorded,
pending reasons kept current, and the cycle's metrics (duration, placed, preempted, pending, queue
depth, placement latency) reported. Cycles are numbered; the placer of each is made for its number."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Link

from suanli.clock import Clock
from suanli.scheduling.domain.jobs import DEFAULT_LOST_FENCE, DEFAULT_WAVE_SIZE
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.queueing import CycleConfig, CycleResult, Placer
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.cycle import CycleMemo, run_cycle, wants_room
from suanli.scheduling.service_layer.envelopes import Envelopes
from suanli.scheduling.service_layer.ports import Append, Metrics, NoMetrics
from suanli.scheduling.service_layer.projection import Projection, job_stream
from suanli.scheduling.service_layer.write_lock import WriteLock
from suanli.telemetry.tracing import SpansPerTrace, tracer

log = logging.getLogger(__name__)

PlacerFactory = Callable[[Sequence[TaskRequest], int], Placer]  # (task requests seen, cycle number)


class CycleRunner:
    def __init__(
        self,
        write_lock: WriteLock,
        projection: Projection,
        capacity: CapacityView,
        placer_factory: PlacerFactory,
        envelopes: Envelopes,
        *,
        clock: Clock,
        config: CycleConfig | None = None,
        metrics: Metrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        perf_counter: Callable[[], float] = time.perf_counter,
        network: Callable[[], NetworkSnapshot] = lambda: EMPTY_NETWORK,
        wave_size: int = DEFAULT_WAVE_SIZE,
        lost_fence: timedelta = DEFAULT_LOST_FENCE,
    ) -> None:
        self._write_lock = write_lock
        self._projection = projection
        self._capacity = capacity
        self._placer_factory = placer_factory
        self._envelopes = envelopes
        self._clock = clock
        self._config = config or CycleConfig()
        self._metrics = metrics or NoMetrics()
        self._monotonic = monotonic
        self._perf_counter = perf_counter
        self._count = 0
        self._last_started = float("-inf")  # monotonic time the last cycle began
        self._last_deciding = float("-inf")  # ... the last one that had a job to place
        self._idle_reported = False
        self._memo = CycleMemo()
        self._network = network
        self._wave_size = wave_size
        self._lost_fence = lost_fence

    @property
    def count(self) -> int:
        """Cycles run so far (the number of the last one)."""
        return self._count

    def since_last(self) -> float:
        """Seconds since the last cycle began (infinite before the first)."""
        return self._monotonic() - self._last_started

    def since_last_deciding(self) -> float:
        """Seconds since the last cycle that had a job to place began (a cycle that found nothing to
        place commits nothing, so it does not count for the gap between cycles)."""
        return self._monotonic() - self._last_deciding

    async def run(self) -> int:
        """One cycle in its own turn of the write lock; returns how many jobs it admitted."""
        async with self._write_lock.turn():
            return await self.run_locked()

    async def run_locked(self) -> int:
        """One cycle by a holder of the write lock whose projection is current."""
        projection = self._projection
        if not projection.queues:
            return 0
        started = self._perf_counter()
        self._last_started = self._monotonic()
        self._count += 1
        if not any(wants_room(job, self._wave_size) for job in projection.live.values()):
            # Nothing to admit means nothing to place, preempt or reserve for: most wakes under load
            # (task reports, capacity updates) find the queues empty, and the cycle would only rebuild
            # its snapshot to learn that. The gauges are zeroed once, as an empty cycle would.
            if not self._idle_reported:
                self._metrics.cycle(self._perf_counter() - started, 0, 0, {}, self._depth())
                self._idle_reported = True
            return 0
        self._last_deciding = self._last_started
        self._idle_reported = False
        # The cycle is one span of its own (a root: it serves every job at once); what it decides for a
        # job is recorded in a span of that job's trace linked to it, so a job's trace shows its cycle.
        with tracer("suanli.scheduling").start_as_current_span(
            "scheduling.cycle", context=Context(), attributes={"cycle": self._count}
        ) as cycle:
            with SpansPerTrace(
                "scheduling.decide",
                attributes={"cycle": self._count},
                links=[Link(cycle.get_span_context())],
                tracer_name="suanli.scheduling",
            ) as decided:
                admitted = await self._cycle(projection, started, decided)
            cycle.set_attribute("jobs.admitted", admitted)
            return admitted

    async def _cycle(self, projection: Projection, started: float, decided: SpansPerTrace) -> int:
        requests = [t.request() for j in projection.live.values() if not j.phase.final for t in j.spec.tasks]
        placer = self._placer_factory(requests, self._count)
        nodes = self._capacity.schedulable()
        # The priority classes are configuration recorded in the store (queue_admin), not fixed at
        # start: without them every job naming a class was inadmissible ("priority class ... is unknown").
        config = replace(self._config, priority_classes=projection.priority_classes)
        outcome = run_cycle(
            projection,
            nodes,
            placer,
            config,
            self._count,
            self._capacity.regions(),
            self._memo,
            self._network(),
            self._wave_size,
            self._clock.now(),
            self._lost_fence,
        )
        appends = []
        for job_id, decisions in outcome.decisions.items():
            # Decided in the job's own trace (its submission's), so its placement continues that trace.
            with decided.scope(projection.traces.get(job_id), key=job_id) as span:
                span.set_attribute("job_id", job_id)
                events = self._envelopes.events(decisions)
            appends.append(Append(job_stream(job_id), projection.jobs[job_id].version, events))
        changed: dict[str, Any] = {
            job_id: reason
            for job_id, reason in outcome.pending.items()
            if projection.pending_reasons.get(job_id) != reason
        }
        changed.update(
            {
                job_id: None
                for job_id in outcome.result.admitted
                if job_id in projection.pending_reasons and job_id not in outcome.pending
            }
        )
        if appends or changed:
            # A cycle's own placements give no room back: the commit wakes no further cycle.
            await self._write_lock.commit(appends, changed)
            for job_id, reason in changed.items():
                if reason is None:
                    projection.pending_reasons.pop(job_id, None)
                else:
                    projection.pending_reasons[job_id] = reason
        self._report(outcome.result, self._perf_counter() - started)
        return len(outcome.result.admissions)

    def _depth(self) -> dict[str, int]:
        """Jobs waiting in each queue, every configured queue included (0 when empty): a dashboard lists
        its queues from this gauge."""
        depth = dict.fromkeys(self._projection.queues, 0)
        for job in self._projection.live.values():
            if job.waiting:
                depth[job.spec.queue] = depth.get(job.spec.queue, 0) + 1
        return depth

    def _report(self, result: CycleResult, seconds: float) -> None:
        now = self._clock.now()
        for admission in result.admissions:
            job = self._projection.jobs[admission.job_id]
            for p in admission.placements:
                self._metrics.placed(
                    self._capacity.nodes[p.node_id].region, (now - job.submitted_at).total_seconds()
                )
        preempted = sum(len(p.victims) for p in result.preemptions)
        pending_by: dict[tuple[str, str], int] = {}
        for waiting in result.pending:
            key = (waiting.queue, str(waiting.reason.code))
            pending_by[key] = pending_by.get(key, 0) + 1
        self._metrics.cycle(seconds, len(result.admissions), preempted, pending_by, self._depth())
        if result.admissions or result.preemptions:
            placed = sum(len(a.placements) for a in result.admissions)
            log.info(
                "cycle %d: admitted %d job(s) with %d task(s), %d preemption(s), %d job(s) pending, %.1f ms",
                self._count,
                len(result.admissions),
                placed,
                len(result.preemptions),
                len(result.pending),
                seconds * 1000,
            )
