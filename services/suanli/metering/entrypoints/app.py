"""The metering stream processor (faust): agents over the input topics, tables of node and task state.

Data flow::

    node.snapshots --+                      nodes table (by node id)      --> capacity.nodes, nodes.status
    placements ------+--> node agents ----> (capacity, liveness,           (timer: Lost after silence)
                     |                       placements)
                     +--> task facts --(owned here: applied in the batch)--> tasks table --> usage.metered
    tasks.lifecycle, jobs.events ---^   (another worker's: internal topic,    (timer: finished tasks pruned)
    usage.samples --------------------   keyed by task id) ------------------^

A fact about a task reaches the worker that owns the task's record: applied in the batch that made it
when that is this worker (the tasks table is partitioned as the facts are), else through one internal
topic keyed by task id. `domain.tasks.apply` does not depend on the order facts of different inputs
arrive in, which several workers never guaranteed anyway. Usage samples, by far
the most numerous, are not facts made here at all: their topic is keyed by task id with the internal
topic's partition count, so the worker that reads a sample owns its task's record and applies it there.
Placements are read on the node side first: they share the node key and partition count with snapshots,
so the device models needed to price a placement are local.

The agents here are thin: they gather what has arrived into batches and hand them to
`service_layer.batches.Batches`, which runs the use cases of `service_layer.metering.Metering`. Outputs
are published and acknowledged *before* the state that records them is written, so a crash in between
re-emits the same records (same deterministic event ids) rather than losing them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from suanli.bus import BrokerWatch
from suanli.bus.deadletter import dead_letter
from suanli.bus.faust import arrived_batches, delivered, logged_table, processor_app, traceparent_of
from suanli.bus.faust_reading import ReadPositions
from suanli.bus.faust_tables import TablesKeeper
from suanli.bus.headers import Headers
from suanli.bus.metrics import BusMetrics
from suanli.bus.retry import RetryPolicy
from suanli.contracts import catalogue
from suanli.metering.adapters.batch import WINDOW_SPAN, LocalFacts, OutputTopics, TableBatch, batches_over
from suanli.metering.adapters.changelog import ChangelogTopics
from suanli.metering.adapters.decoded import Checkpoints, DecodedStates
from suanli.metering.domain import TaskFact
from suanli.metering.entrypoints.inputs import event_intakes, fact_intake
from suanli.metering.entrypoints.settings import MeteringSettings
from suanli.metering.entrypoints.topics import MeteringTopics
from suanli.metering.service_layer.batches import Batches, Intake
from suanli.metering.service_layer.metering import Metering
from suanli.metering.service_layer.ports import Gauges
from suanli.telemetry.tracing import SpansPerTrace, tracer

log = logging.getLogger(__name__)

# faust has no types: its app, topics, tables, streams and events are Any from here on.
FaustEvent = Any

_RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}


def _where(event: FaustEvent) -> str:
    m = event.message
    return f"{m.topic}[{m.partition}]@{m.offset}"


class MeteringApp:
    """Builds the faust app; ``app`` is what a worker runs. Wired by `suanli.metering.bootstrap`."""

    def __init__(
        self,
        settings: MeteringSettings,
        metering: Metering,
        *,
        gauges: Gauges,
        retry: RetryPolicy,
        bus_metrics: BusMetrics,
    ) -> None:
        self.settings = settings
        self.metering = metering
        self.gauges = gauges
        self.retry = retry
        self.bus_metrics = bus_metrics
        self.names = MeteringTopics(settings.topic_prefix)
        self.app = processor_app(
            settings.group_id,
            settings.bootstrap,
            partitions=self.names.partitions,
            fetch_wait_ms=settings.fetch_wait_ms,
            metrics=bus_metrics,
        )
        self._dlq: dict[str, Any] = {}
        self._partitioner = DefaultPartitioner()
        n = self.names
        self.snapshots = self._topic(n.snapshots)
        self.placements = self._topic(n.placements)
        self.lifecycle = self._topic(n.lifecycle)
        self.samples = self._topic(n.samples)
        self.jobs = self._topic(n.jobs)
        self.facts = self._topic(n.facts)
        outputs = OutputTopics(
            capacity=self._topic(n.capacity),
            status=self._topic(n.status),
            usage=self._topic(n.usage),
            facts=self.facts,
        )
        # use_partitioner: the liveness timer writes outside any event, so the changelog partition comes
        # from the key; the producers of snapshots and placements partition by the same node key.
        # Tables pick their changelog serializers from key_type/value_type (bytes -> raw); a Schema's
        # serializers are not used on recovery, which would then read the raw keys as JSON.
        self.nodes = self.app.Table(
            "nodes", partitions=n.partitions, use_partitioner=True, key_type=bytes, value_type=bytes
        )
        # use_partitioner: a batch writes after its records were consumed, outside any one event; facts are
        # produced with the same partitioner on the same key, so the changelog partition is the fact's.
        # Logged: the records that wrote a task's state are acknowledged only once its changelog holds
        # it (a lost task record is a charge lost; a node's state comes whole with its next snapshot).
        self.tasks = logged_table(
            self.app, "tasks", partitions=n.partitions, use_partitioner=True, key_type=bytes, value_type=bytes
        )
        decoded = DecodedStates(checkpoints=Checkpoints(round(settings.checkpoint_s * 1000)))
        self.begin = batches_over(
            self.nodes, self.tasks, outputs, decoded, ChangelogTopics(self.app), self._local_facts
        )
        # The tables outlive a broker that started over: written back to its new changelogs.
        watch = BrokerWatch(settings.bootstrap, MeteringTopics.specs(), prefix=settings.topic_prefix)
        self.keeper = TablesKeeper(self.app, (self.nodes, self.tasks), watch, then=self.remeter_tasks)
        self.batches: Batches[FaustEvent] = Batches(
            self.begin,
            retry=retry,
            dead_letter=self._dead_letter,
            describe=_where,
            retried=lambda event: bus_metrics.retried(event.message.topic),
        )
        # The snapshot and placement agents and the liveness timer all read, publish and then write node
        # state; one at a time, or one would write back a state that misses what the other recorded.
        self._node_side = asyncio.Lock()
        # Every agent that makes or applies task facts (the owned ones are applied where they are made)
        # and the pruning timer read and write task records. Taken after the node side, never before.
        self._task_side = asyncio.Lock()
        # How far the snapshots have been read, against what the broker holds (liveness).
        self._read = ReadPositions(self.app, self.names.snapshots)
        self._register()

    # -- wiring -----------------------------------------------------------------------------------------

    def _topic(self, name: str) -> Any:
        return self.app.topic(name, **_RAW)

    def _register(self) -> None:
        intakes = event_intakes(self.metering)
        both = (self._node_side, self._task_side)
        routes = [
            (catalogue.NODE_SNAPSHOTS, self.snapshots, both),
            (catalogue.PLACEMENTS, self.placements, both),
            (catalogue.TASKS_LIFECYCLE, self.lifecycle, (self._task_side,)),
            # Samples are applied to the task records at once (entrypoints.inputs): the task side's.
            (catalogue.USAGE_SAMPLES, self.samples, (self._task_side,)),
            (catalogue.JOBS_EVENTS, self.jobs, (self._task_side,)),
        ]
        for name, topic, locks in routes:
            self.app.agent(topic, name=f"metering.{name}")(
                self._consumer(
                    intakes[name],
                    locks,
                    f"metering.{name}",
                    handled=self._read.handled if name == catalogue.NODE_SNAPSHOTS else None,
                )
            )
        self.app.agent(self.facts, name="metering.task-facts")(
            self._consumer(fact_intake(self.metering), (self._task_side,), WINDOW_SPAN)
        )
        self.app.timer(self.settings.interval_s, name="metering.liveness")(self._liveness)
        self.app.timer(self.settings.prune_interval_s, name="metering.prune-tasks")(self.prune_tasks)
        self.app.timer(self.settings.broker_check_s, name="metering.broker-check")(self.keeper.check)

    def _consumer(
        self,
        intake: Intake[FaustEvent, Any],
        locks: tuple[asyncio.Lock, ...],
        span_name: str,
        handled: Callable[[list[FaustEvent]], None] | None = None,
    ) -> Callable[[Any], AsyncIterator[None]]:
        batch_max = self.settings.batch_max
        batches = self.batches
        metrics = self.bus_metrics

        tasks = self.tasks

        async def consume(stream: Any) -> AsyncIterator[None]:
            # The batch's own task writes, taken while it still holds its locks (another agent's come later).
            written: list[Awaitable[object]] = []
            async for events in arrived_batches(
                stream, batch_max=batch_max, metrics=metrics, durable=lambda: written
            ):
                # One span per trace in the batch (not per record), a child of the records' span: what a
                # record yields (facts, usage windows) is published inside it, so it stays in the trace
                # of the record it came from however the batch was mixed.
                with SpansPerTrace(span_name, attributes={"batch.records": len(events)}) as spans:
                    async with contextlib.AsyncExitStack() as held:
                        for lock in locks:  # in the order given: the node side before the task side
                            await held.enter_async_context(lock)
                        await batches.handle(events, intake, lambda e: spans.scope(traceparent_of(e)))
                        written[:] = tasks.unlogged()
                        if handled is not None:
                            handled(events)
                yield None

        return consume

    async def _dead_letter(self, event: FaustEvent, error: Exception, *, attempts: int, reason: str) -> None:
        await dead_letter(
            delivered(event),
            error,
            attempts=attempts,
            reason=reason,
            consumer=self.app.conf.id,
            send=self._send_raw,
            retry=self.retry,
            metrics=self.bus_metrics,
        )

    async def _send_raw(self, topic: str, key: bytes | None, value: bytes, headers: Headers) -> None:
        target = self._dlq.get(topic) or self._dlq.setdefault(topic, self._topic(topic))
        await (await target.send(key=key, value=value, headers=headers))

    # -- task facts applied where they are made --------------------------------------------------------

    def _local_facts(self) -> LocalFacts | None:
        """For one batch: applies a task fact whose task-facts partition this worker owns, in the batch
        that made it, instead of producing it and reading it back (half of what metering read and wrote;
        docs/BENCHMARKS.md, "Where capacity freshness went"). The task's record is this worker's (the
        tasks table is partitioned as the facts are), and the batch holds the task side's lock. Facts
        of tasks another worker owns still go through the topic; `domain.tasks.apply` does not depend on
        the order facts of different sources arrive in."""
        if self.app.in_recovery:
            return None
        owns = self._owned(self.names.facts)

        def apply_here(fact: TaskFact, batch: TableBatch) -> bool:
            if not owns(fact.task_id):
                return False
            # The span the task-facts agent would have handled it in, a child of the input's: a trace
            # reads the same whichever worker owns the task (docs/operations.md, the trace map).
            with tracer("suanli").start_as_current_span(WINDOW_SPAN, attributes={"task_id": fact.task_id}):
                self.metering.apply_fact(fact, batch)
            return True

        return apply_here

    # -- pruning --------------------------------------------------------------------------------------

    async def prune_tasks(self) -> int:
        """One round: finished task records past the retention dropped, a bounded batch at a time.

        Each batch is committed (its tombstones written to the changelog) before the next, and the lock
        is let go between batches so the task-facts agent is never held up for more than one.
        """
        owns = self._owned(self.names.facts)
        total = 0
        while True:
            async with self._task_side:
                batch = self.begin()
                pruned = self.metering.prune_tasks(batch, owns, self.settings.prune_batch)
                await batch.commit()
            total += pruned
            if pruned < self.settings.prune_batch:
                break
            await asyncio.sleep(0)
        if total:
            log.info(
                "pruned %d finished task records older than %.0f s", total, self.settings.task_retention_s
            )
        return total

    async def remeter_tasks(self) -> int:
        """Every usage window of this worker's task records published again (after the broker started
        over, which took the windows billing had not read yet with it)."""
        owns = self._owned(self.names.facts)
        async with self._task_side:
            batch = self.begin()
            published = self.metering.remeter_tasks(batch, owns)
            await batch.commit()
        log.warning("published %d usage windows again after the broker started over", published)
        return published

    # -- liveness ---------------------------------------------------------------------------------------

    async def _liveness(self) -> None:
        async with self._node_side:
            # Right after a restart the tables hold every node as last heard before the crash: without
            # this, the whole fleet was declared LOST the moment the worker was ready, before it read a
            # single one of the snapshots sent meanwhile.
            self.metering.reading(self._assigned(self.names.snapshots), bool(self.app.in_recovery))
            batch = self.begin()
            summary = self.metering.check_liveness(
                batch, self._checked_here(), self._read.behind(), self._read.heard()
            )
            await batch.commit()
        self.gauges.observe(summary)

    def _checked_here(self) -> Callable[[str], bool]:
        # With several workers each checks only the nodes whose snapshot partitions it owns: one Lost
        # per node.
        return self._owned(self.names.snapshots)

    def _assigned(self, topic: str) -> frozenset[int]:
        """The partitions of ``topic`` assigned to this worker (actively, not as standby)."""
        return frozenset(tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == topic)

    def _owned(self, topic: str) -> Callable[[str], bool]:
        """Whether a key's partition of ``topic`` is assigned to this worker (actively, not as standby)."""
        mine = self._assigned(topic)
        if not mine:
            return lambda key: False
        count = self.app.consumer.topic_partitions(topic) or self.names.partitions
        partitions = list(range(count))

        def owns(key: str) -> bool:
            # The partition the key maps to: the same producer partitioner (murmur2) as the producers'.
            return int(self._partitioner(key.encode(), partitions, partitions)) in mine

        return owns
