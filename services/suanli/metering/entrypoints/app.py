"""The metering stream processor (faust): agents over the input topics, tables of node and task state.

Data flow::

    node.snapshots --+                      nodes table (by node id)      --> capacity.nodes, nodes.status
    placements ------+--> node agents ----> (capacity, liveness,           (timer: Lost after silence)
                     |                       placements)
                     +--> task facts (internal topic, keyed by task id) --> tasks table --> usage.metered
    tasks.lifecycle, usage.samples, jobs.events ---^

Everything about one task is funnelled through one internal topic keyed by task id, so one agent owns
the task's state and sees its facts in one order, whatever topic they came from. Placements are read
on the node side first: they share the node key and partition count with snapshots, so the device
models needed to price a placement are local.

Outputs are published and acknowledged *before* the state that records them is written, so a crash in
between re-emits the same records (same deterministic event ids) rather than losing them. Records are
handled in batches of what has arrived (`Effects`): every output of the batch is sent, every
acknowledgement awaited, then the tables are written, so one broker round trip is paid per batch rather
than per output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import faust
from aiokafka.partitioner import DefaultPartitioner
from faust.types import EventT, StreamT, TopicT

from suanli.bus.admin import resolve_replication_factor
from suanli.bus.errors import is_retriable
from suanli.bus.headers import EVENT_ID, EVENT_NAME, dead_letter_headers
from suanli.bus.metrics import BusMetrics
from suanli.bus.retry import RetryPolicy
from suanli.bus.topics import dlq_topic
from suanli.contracts import catalogue, decode, encode, events_on
from suanli.metering.adapters import records
from suanli.metering.adapters.jsoncodec import TaggedCodec
from suanli.metering.adapters.metrics import MeteringMetrics
from suanli.metering.adapters.transport import ShortFetchTransport
from suanli.metering.domain import (
    Clock,
    Ended,
    JobKnown,
    MeteringPolicy,
    NodeState,
    NodeStatus,
    Placed,
    Sampled,
    Seen,
    Started,
    StatusChange,
    TaskFact,
    TaskState,
    UsageWindow,
    check,
    on_placed,
    on_preempted,
    on_snapshot,
    step,
    summarise,
    to_ms,
    with_liveness,
)
from suanli.metering.entrypoints.config import MeteringConfig
from suanli.metering.entrypoints.decoded import DecodedStates
from suanli.metering.entrypoints.effects import Effects
from suanli.metering.entrypoints.topics import MeteringTopics
from suanli.resources import DeviceCatalogue, default_catalogue
from suanli.telemetry import inject_headers

log = logging.getLogger(__name__)

Handler = Callable[[str, Mapping[str, Any], Effects], None]
RawHandler = Callable[[bytes, Effects], None]

FACTS = TaggedCodec(JobKnown, Placed, Started, Ended, Seen, Sampled)
_RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}


class UnexpectedEventError(ValueError):
    """A well-formed event of a kind that does not belong on the topic it arrived on."""

    reason = "unexpected-event"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def broker_urls(bootstrap: str) -> list[str]:
    return [f"kafka://{h.strip()}" for h in bootstrap.split(",") if h.strip()]


class MeteringApp:
    """Builds the faust app; ``app`` is what a worker runs."""

    def __init__(
        self,
        config: MeteringConfig,
        *,
        clock: Clock = wall_clock_ms,
        catalogue: DeviceCatalogue | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.catalogue = catalogue or default_catalogue()
        self.policy = MeteringPolicy(republish_after_ms=int(config.republish_s * 1000))
        self.names = MeteringTopics(config.topic_prefix)
        self.app = faust.App(
            config.group_id,
            broker=broker_urls(config.bootstrap),
            store="memory://",
            web_enabled=False,
            # Tansu answers ListOffsets(latest) with the base offset of the last batch + 1; changelog
            # recovery trusts it, so every changelog record must be its own batch (ARCHITECTURE §3).
            producer_max_batch_size=1,
            consumer_auto_offset_reset="earliest",
            # faust's own topics (table changelogs) follow the deployment's replication, like ours.
            topic_replication_factor=resolve_replication_factor(),
            topic_partitions=self.names.partitions,
            stream_wait_empty=False,
            # faust's 60 s defaults hold a fresh group's first join for half a minute on Tansu and leave
            # a crashed worker's partitions idle for a minute; the bus consumer uses 10 s as well.
            broker_session_timeout=10.0,
            broker_rebalance_timeout=10.0,
            broker_heartbeat_interval=1.0,
        )
        # Set before anything asks the app for its consumer, which the transport creates.
        self.app.transport = ShortFetchTransport(self.app, fetch_max_wait_ms=config.fetch_max_wait_ms)
        self.metrics = MeteringMetrics()
        self.bus_metrics = BusMetrics(config.group_id)
        self.retry = RetryPolicy()
        self._dlq: dict[str, TopicT] = {}
        self._partitioner = DefaultPartitioner()
        n = self.names
        self.snapshots = self._topic(n.snapshots)
        self.placements = self._topic(n.placements)
        self.lifecycle = self._topic(n.lifecycle)
        self.samples = self._topic(n.samples)
        self.jobs = self._topic(n.jobs)
        self.facts = self._topic(n.facts)
        self.capacity_out = self._topic(n.capacity)
        self.status_out = self._topic(n.status)
        self.usage_out = self._topic(n.usage)
        # use_partitioner: the liveness timer writes outside any event, so the changelog partition comes
        # from the key; the producers of snapshots and placements partition by the same node key.
        # Tables pick their changelog serializers from key_type/value_type (bytes -> raw); a Schema's
        # serializers are not used on recovery, which would then read the raw keys as JSON.
        self.nodes = self.app.Table(
            "nodes", partitions=n.partitions, use_partitioner=True, key_type=bytes, value_type=bytes
        )
        # use_partitioner: a batch writes after its records were consumed, outside any one event; facts are
        # produced with the same partitioner on the same key, so the changelog partition is the fact's.
        self.tasks = self.app.Table(
            "tasks", partitions=n.partitions, use_partitioner=True, key_type=bytes, value_type=bytes
        )
        # The snapshot and placement agents and the liveness timer all read, publish and then write node
        # state; one at a time, or one would write back a state that misses what the other recorded.
        self._node_side = asyncio.Lock()
        self._states = DecodedStates()
        self._register()

    # -- wiring -----------------------------------------------------------------------------------------

    def _topic(self, name: str) -> TopicT:
        return self.app.topic(name, **_RAW)

    def _register(self) -> None:
        routes: list[tuple[str, TopicT, Handler, asyncio.Lock | None]] = [
            (catalogue.NODE_SNAPSHOTS, self.snapshots, self._on_node_event, self._node_side),
            (catalogue.PLACEMENTS, self.placements, self._on_placement, self._node_side),
            (catalogue.TASKS_LIFECYCLE, self.lifecycle, self._on_lifecycle, None),
            (catalogue.USAGE_SAMPLES, self.samples, self._on_sample, None),
            (catalogue.JOBS_EVENTS, self.jobs, self._on_job, None),
        ]
        for name, topic, handler, lock in routes:
            consume = self._consumer(self._decoding(name, handler), lock)
            self.app.agent(topic, name=f"metering.{name}")(consume)
        # The tasks table has one writer, this agent: no lock.
        self.app.agent(self.facts, name="metering.task-facts")(self._consumer(self._on_fact, None))
        self.app.timer(self.config.interval_s, name="metering.liveness")(self._liveness)

    def _decoding(self, topic: str, handler: Handler) -> RawHandler:
        belongs = frozenset(events_on(topic))

        def handle(value: bytes, out: Effects) -> None:
            name, record = decode(value)
            if name not in belongs:
                raise UnexpectedEventError(f"{name} does not belong on {topic}")
            # Handlers skip the events of their topic that metering has no use for.
            handler(name, record, out)

        return handle

    def _consumer(
        self, handle: RawHandler, lock: asyncio.Lock | None
    ) -> Callable[[StreamT], AsyncIterator[None]]:
        batch_max = self.config.batch_max

        async def consume(stream: StreamT) -> AsyncIterator[None]:
            # Acked by hand, after the batch is handled: faust would ack a record (and may commit its
            # offset) as soon as the next one is asked for, before its outputs are acknowledged.
            manual = stream.noack()
            arrived = manual.channel.queue  # records fetched and not yet taken: they join this batch
            events: list[EventT] = []
            async for event in manual.events():
                events.append(event)
                # A batch is what has already arrived, so no record waits for more to come.
                if len(events) < batch_max and not arrived.empty():
                    continue
                async with lock or contextlib.nullcontext():
                    await self._batch(events, handle)
                for done in events:
                    await manual.ack(done)
                events = []
                yield None

        return consume

    async def _batch(self, events: Sequence[EventT], handle: RawHandler) -> None:
        """Handle records in order; their outputs go in one round trip, then their states are written.

        Any failure, in a handler or at the broker, leaves the tables unwritten; the batch is then handled
        again record by record, so each failure is retried or dead-lettered on its own record as before.
        """
        batch = Effects()
        try:
            for event in events:
                handle(event.value, batch)
            await batch.commit()
        except Exception as exc:
            if len(events) > 1:
                log.info("batch of %d failed (%r); handling its records one by one", len(events), exc)
            for event in events:
                await self._guarded(event, handle)

    async def _guarded(self, event: EventT, handle: RawHandler) -> None:
        """Handle one record; retry what the broker may fix, dead-letter what is wrong with the record.

        Retrying is safe because a handler writes its state only after its outputs are acknowledged, and
        outputs carry deterministic ids: a second run re-sends the same records.
        """
        failures = 0
        while True:
            try:
                one = Effects()
                handle(event.value, one)
                await one.commit()
                return
            except Exception as exc:
                failures += 1
                if not self.retry.should_retry(failures, is_retriable(exc)):
                    await self._dead_letter(event, exc, attempts=failures)
                    return
                log.warning("retrying %s after %r", event.message.topic, exc)
                await asyncio.sleep(self.retry.backoff_s(failures))

    async def _dead_letter(self, event: EventT, exc: Exception, *, attempts: int) -> None:
        message = event.message
        target = dlq_topic(message.topic)
        reason = getattr(exc, "reason", type(exc).__name__)
        log.warning(
            "dead-lettering %s[%d]@%d (%s): %s", message.topic, message.partition, message.offset, reason, exc
        )
        topic = self._dlq.get(target) or self._dlq.setdefault(target, self._topic(target))
        headers = dead_letter_headers(
            _header_list(message.headers),
            error=exc,
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            attempts=attempts,
        )
        await (await topic.send(key=message.key, value=message.value, headers=headers))
        self.bus_metrics.dead_lettered(message.topic, reason)

    @staticmethod
    def _publish(out: Effects, topic: TopicT, key: str, event_name: str, record: dict[str, Any]) -> None:
        value = encode(event_name, record)
        headers = inject_headers([(EVENT_NAME, event_name.encode()), (EVENT_ID, record["event_id"].encode())])
        out.send(topic, key.encode(), value, headers)

    def _send_facts(self, out: Effects, facts: Iterable[TaskFact]) -> None:
        for fact in facts:
            out.send(self.facts, fact.task_id.encode(), FACTS.dumps(fact))

    # -- node side --------------------------------------------------------------------------------------

    def _node(self, out: Effects, node_id: str) -> NodeState | None:
        return self._states.read(out, self.nodes, node_id.encode(), NodeState)

    def _on_node_event(self, name: str, record: Mapping[str, Any], effects: Effects) -> None:
        if name != "NodeSnapshot":
            return  # NodeRegistered is identity only; the next snapshot carries everything views need
        node_id = record["node_id"]
        out = on_snapshot(
            self._node(effects, node_id),
            record,
            received_at_ms=self.clock(),
            catalogue=self.catalogue,
            policy=self.policy,
        )
        if out.stale:
            return
        for alloc, reason in out.rejected:
            log.error("placement of %s attempt %d dropped: %s", alloc.task_id, alloc.attempt, reason)
        if out.capacity is not None:
            cap = records.capacity_record(
                out.capacity, source_event_id=record["event_id"], occurred_at_ms=to_ms(record["occurred_at"])
            )
            self._publish(effects, self.capacity_out, node_id, "NodeCapacityChanged", cap)
        if out.status is not None:
            self._publish_status(effects, out.status)
        self._send_facts(effects, (*out.placed, *out.seen))
        self._states.write(effects, self.nodes, node_id.encode(), out.state)

    def _publish_status(self, out: Effects, change: StatusChange) -> None:
        log.info("node %s: %s -> %s (%s)", change.node_id, change.previous, change.status, change.reason)
        self._publish(
            out, self.status_out, change.node_id, "NodeStatusChanged", records.status_record(change)
        )

    def _on_placement(self, name: str, record: Mapping[str, Any], out: Effects) -> None:
        node_id = record["node_id"]
        if name == "TaskPlaced":
            state, placed = on_placed(
                self._node(out, node_id), records.allocation_of(record), catalogue=self.catalogue
            )
            if placed is not None:
                self._send_facts(out, [placed])
            self._states.write(out, self.nodes, node_id.encode(), state)
        elif name == "TaskPreempted":
            self._send_facts(out, [records.preempted_fact(record)])
            after = on_preempted(self._node(out, node_id), record["task_id"], record["attempt"])
            if after is not None:
                self._states.write(out, self.nodes, node_id.encode(), after)
        # Stop requests change no charge: the task is metered until its agent reports it ended.

    async def _liveness(self) -> None:
        async with self._node_side:
            states = await self._check_liveness()
        self.metrics.observe(
            summarise(
                (s.capacity, s.liveness.status if s.liveness else NodeStatus.UNKNOWN)
                for s in states
                if s.capacity is not None
            )
        )

    async def _check_liveness(self) -> list[NodeState]:
        now = self.clock()
        mine = self._active_node_partitions()
        states = []
        out = Effects()
        for key in list(self.nodes.keys()):
            state = self._states.read(out, self.nodes, key, NodeState)
            if state is None:
                continue
            if mine and state.liveness is not None and self._partition_of(key) in mine:
                after, change = check(state.liveness, now, lost_after=self.config.lost_after)
                if change is not None:
                    self._publish_status(out, change)
                    state = with_liveness(state, after)
                    self._states.write(out, self.nodes, key, state)
            states.append(state)
        await out.commit()
        return states

    def _partition_of(self, key: bytes) -> int:
        # The snapshot partition a node's key maps to: the same producer partitioner (murmur2) as sensing.
        count = self.app.consumer.topic_partitions(self.names.snapshots) or self.names.partitions
        partitions = list(range(count))
        return int(self._partitioner(key, partitions, partitions))

    def _active_node_partitions(self) -> set[int]:
        # With several workers each checks only the nodes whose partitions it owns: one Lost per node.
        return {
            tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == self.names.snapshots
        }

    # -- task side --------------------------------------------------------------------------------------

    def _on_lifecycle(self, name: str, record: Mapping[str, Any], out: Effects) -> None:
        fact = records.lifecycle_fact(name, record)
        if fact is not None:
            self._send_facts(out, [fact])

    def _on_sample(self, name: str, record: Mapping[str, Any], out: Effects) -> None:
        if name == "UsageSampled":
            self._send_facts(out, [records.sample_fact(record)])

    def _on_job(self, name: str, record: Mapping[str, Any], out: Effects) -> None:
        if name == "JobSubmitted":
            self._send_facts(out, records.job_facts(record))
        # Other job events change nothing metering charges: tasks report their own ends.

    def _on_fact(self, value: bytes, out: Effects) -> None:
        fact: TaskFact = FACTS.loads(value)
        key = fact.task_id.encode()
        state, windows = step(self._states.read(out, self.tasks, key, TaskState), fact)
        for window in windows:
            self._publish_usage(out, window)
        self._states.write(out, self.tasks, key, state)

    def _publish_usage(self, out: Effects, window: UsageWindow) -> None:
        self._publish(
            out, self.usage_out, window.charge.task_id, "UsageMetered", records.usage_record(window)
        )


def _header_list(headers: Any) -> list[tuple[str, bytes]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    return [(k, v) for k, v in headers]
