"""The node agent's use cases: announce the node, report it, run and stop what the scheduler places on it.

Every report carries the whole node and the ids of every task it holds (level-triggered, ARCHITECTURE §3),
so a lost snapshot or task event heals with the next report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from suanli.clock import Clock, IdFactory
from suanli.sensing.domain import records
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.observation import NodeObservation
from suanli.sensing.domain.placement import Placement, StopOrder
from suanli.sensing.domain.tasks import RunState, TaskEvent, TaskRun, TaskTable
from suanli.sensing.service_layer.ports import (
    Collector,
    EventSink,
    LaunchError,
    TaskHandle,
    TaskLauncher,
    UsageProbe,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    interval_s: float
    stop_grace_s: float
    # Extra labels published with the node (collector in use, why GPUs are missing, ...).
    labels: Mapping[str, str] = field(default_factory=dict)
    # Task starts and ends are retried this long (first pause, then doubling up to 5 s) when publishing fails.
    publish_retry_s: float = 0.5
    publish_retry_for_s: float = 300.0

    @property
    def interval_ms(self) -> int:
        return round(self.interval_s * 1000)


class NodeAgent:
    def __init__(
        self,
        identity: NodeIdentity,
        collector: Collector,
        launcher: TaskLauncher,
        usage_probe: UsageProbe,
        sink: EventSink,
        *,
        clock: Clock,
        ids: IdFactory,
        settings: AgentSettings,
        table: TaskTable | None = None,
    ) -> None:
        self.identity = identity
        self._collector = collector
        self._launcher = launcher
        self._usage = usage_probe
        self._sink = sink
        self._clock = clock
        self._ids = ids
        self.settings = settings
        # Shared with a simulated collector, whose load model follows the tasks in this table.
        self.table = table if table is not None else TaskTable()
        self.sequence = 0
        self._inventory_known = False
        self._handles: dict[str, TaskHandle] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._starting: set[asyncio.Task[None]] = set()  # TaskStarted publishes in flight
        self.refused = 0  # placements refused at admission, for the agent's metrics

    def _learn_inventory(self, observation: NodeObservation) -> None:
        self.table.device_indices = frozenset(d.index for d in observation.devices)
        self._inventory_known = True

    def _stamp(self) -> records.Stamp:
        return records.Stamp(str(self._ids()), self._clock.now())

    async def register(self) -> NodeObservation:
        """Publish NodeRegistered with the static inventory; learns which device indices exist."""
        observation = self._collector.collect()
        self._learn_inventory(observation)
        if observation.degraded_reason:
            log.warning("%s: running host-only: %s", self.identity.node_id, observation.degraded_reason)
        record = records.node_registered(self.identity, observation, self.settings.labels, self._stamp())
        await self._sink.publish("NodeRegistered", record)
        return observation

    async def report(self) -> NodeObservation:
        """Publish a NodeSnapshot of the whole node, then one UsageSampled per running task."""
        return await self.publish_report(*self.take_snapshot())

    def take_snapshot(self) -> tuple[NodeObservation, dict[str, Any]]:
        """The node's NodeSnapshot, stamped now (`publish_report` sends it)."""
        observation = self._collector.collect()
        self.sequence += 1
        snapshot = records.node_snapshot(
            self.identity,
            observation,
            labels=self.settings.labels,
            sequence=self.sequence,
            interval_ms=self.settings.interval_ms,
            task_ids=self.table.task_ids(),
            stamp=self._stamp(),
        )
        return observation, snapshot

    async def publish_report(self, observation: NodeObservation, snapshot: dict[str, Any]) -> NodeObservation:
        """Publish a snapshot `take_snapshot` took, then one UsageSampled per running task."""
        await self._sink.publish("NodeSnapshot", snapshot)
        for run in list(self.table.running()):
            usage = self._usage.usage(run, observation)
            p = run.placement
            sample = records.usage_sampled(
                self.identity,
                task_id=p.task_id,
                job_id=p.job_id,
                attempt=p.attempt,
                device_indices=p.device_indices,
                usage=usage,
                interval_ms=self.settings.interval_ms,
                stamp=self._stamp(),
            )
            await self._sink.publish("UsageSampled", sample)
        return observation

    async def place(self, placement: Placement) -> None:
        if not self._inventory_known:
            # An order can arrive before register() ran; admission needs to know the devices.
            self._learn_inventory(self._collector.collect())
        stale = self.table.blocking(placement)
        if stale:
            await self._supersede(stale, placement)
        admission = self.table.admit(placement)
        if admission.event is not None:
            self.refused += 1
            log.warning(
                "%s: refused task %s: %s", self.identity.node_id, placement.task_id, admission.event.reason
            )
            await self._emit(admission.event)
        if admission.run is None:
            return
        try:
            handle = await self._launcher.launch(placement)
        except LaunchError as exc:
            failed = self.table.launch_failed(placement.task_id, str(exc))
            if failed is not None:
                await self._emit(failed)
            return
        self._handles[placement.task_id] = handle
        started = self.table.started(placement.task_id, handle.pid, self._clock.now())
        # TaskStarted is published (and retried) alongside, so the next order does not wait for the
        # broker's ack of this one; the watcher publishes the task's end only after its start is out (or
        # given up), so the two stay in order, and it watches even if the start was never published, so the
        # end is never lost.
        starting = None
        if started is not None:
            starting = asyncio.create_task(self._emit(started), name=f"start-{placement.task_id}")
            self._starting.add(starting)
            starting.add_done_callback(self._started_out)
        self._watchers[placement.task_id] = asyncio.create_task(
            self._watch(placement.task_id, handle, starting), name=f"task-{placement.task_id}"
        )
        if starting is not None:
            await asyncio.sleep(0)  # let the start reach the sink (a sink that does not wait is done here)
        run = self.table.get(placement.task_id)
        if run is not None and run.state is RunState.STOPPING:
            handle.terminate(self.settings.stop_grace_s)

    async def stop(self, order: StopOrder) -> bool:
        """Stop a placed task (preemption, or the scheduler's stop request); False when it is not here
        (already ended, another attempt). Its end is reported as TaskFailed(KILLED) with the reason: the
        scheduler records any end of a task it is stopping as STOPPED, so the kind only informs people.
        A simulated task releases its resources at once; a process gets SIGTERM, then SIGKILL after grace.
        """
        prefix = "preempted" if order.preempted else "stopped"
        run = self.table.request_stop(order.task_id, order.attempt, f"{prefix}: {order.reason}")
        if run is None:
            return False
        handle = self._handles.get(order.task_id)
        if handle is not None:
            handle.terminate(self.settings.stop_grace_s)
        return True

    async def _supersede(self, stale: list[TaskRun], placement: Placement) -> None:
        """Stop what the scheduler no longer expects here, and wait (up to the grace, plus a margin for
        SIGKILL) until their ends are reported, so the new placement finds its devices free."""
        reason = f"superseded by {placement.task_id} attempt {placement.attempt}"
        waits = []
        for run in stale:
            log.warning(
                "%s: stopping task %s attempt %d: %s",
                self.identity.node_id,
                run.task_id,
                run.placement.attempt,
                reason,
            )
            self.table.request_stop(run.task_id, run.placement.attempt, f"stopped: {reason}")
            handle = self._handles.get(run.task_id)
            if handle is not None:
                handle.terminate(self.settings.stop_grace_s)
            watcher = self._watchers.get(run.task_id)
            if watcher is not None:
                waits.append(watcher)
        if waits:
            await asyncio.wait(waits, timeout=self.settings.stop_grace_s + 5.0)

    def _started_out(self, starting: asyncio.Task[None]) -> None:
        self._starting.discard(starting)
        if not starting.cancelled() and starting.exception() is not None:
            log.error(
                "%s: gave up publishing %s: %r",
                self.identity.node_id,
                starting.get_name(),
                starting.exception(),
            )

    async def _watch(
        self, task_id: str, handle: TaskHandle, starting: asyncio.Task[None] | None = None
    ) -> None:
        event: TaskEvent | None
        try:
            exit_code = await handle.wait()
        except Exception as exc:  # the handle itself broke: report the task lost rather than hang
            log.exception("%s: lost track of task %s", self.identity.node_id, task_id)
            event = self.table.launch_failed(task_id, f"lost track of the process: {exc!r}")
        else:
            event = self.table.exited(task_id, exit_code)
        self._handles.pop(task_id, None)
        if starting is not None:  # the end goes out after the start (or after giving up on it)
            await asyncio.wait({starting})
        self._watchers.pop(task_id, None)
        if event is not None:
            await self._emit(event)

    async def _emit(self, event: TaskEvent) -> None:
        """Publish a task's start or end, retrying the same record (same event id, so the scheduler
        de-duplicates) while the bus fails: a lost end would make the scheduler take the task for lost
        and run it a second time (seen when the broker restarted and the topic was not there yet)."""
        name, record = records.task_event(self.identity, event, self._stamp())
        delay = self.settings.publish_retry_s
        deadline = asyncio.get_running_loop().time() + self.settings.publish_retry_for_s
        while True:
            try:
                await self._sink.publish(name, record)
                return
            except Exception as exc:
                if asyncio.get_running_loop().time() + delay > deadline:
                    raise
                log.warning(
                    "%s: publishing %s of %s failed, retrying in %.1fs: %r",
                    self.identity.node_id,
                    name,
                    record["task_id"],
                    delay,
                    exc,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def stop_all(self, reason: str) -> int:
        """Stop every task here (each end reported as KILLED with ``reason``); how many were stopped."""
        stopped = 0
        for run in self.table.runs():
            if self.table.request_stop(run.task_id, run.placement.attempt, reason) is None:
                continue
            stopped += 1
            handle = self._handles.get(run.task_id)
            if handle is not None:
                handle.terminate(self.settings.stop_grace_s)
        return stopped

    async def shutdown(self, *, stop_tasks: bool = True) -> None:
        """Stop every task (reported as KILLED) and wait for their ends to be published."""
        if stop_tasks:
            self.stop_all("agent shutting down")
        if self._starting:  # every start that was placed is published before the agent goes
            await asyncio.wait(set(self._starting))
        watchers = list(self._watchers.values())
        if not stop_tasks:
            for watcher in watchers:
                watcher.cancel()
        for watcher in watchers:
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
