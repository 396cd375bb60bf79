"""Dead-letter topics on the broker: read them past their purge marks, replay records, move the marks.

The decisions (what a record says, which ones a command takes, what a replay sends, where a mark goes)
are `suanli.bus.dlq`; this module only moves records and offsets with aiokafka, in standard Kafka
terms: metadata for the topic list, fetches from explicit offsets, and the committed offsets of the
group `PURGE_GROUP` (fetched and committed for explicit partitions, which Tansu answers correctly).
A topic is described only once the full topic list shows it exists: a metadata request naming a topic
that does not exist creates it on brokers that auto-create topics (Tansu does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from suanli.bus.dlq import (
    PURGE_GROUP,
    DeadLetter,
    PurgeMarks,
    TopicSummary,
    dlq_topics,
    marks_after,
    replay_of,
    summarise,
)
from suanli.bus.errors import BusClosedError
from suanli.bus.publisher import EventPublisher, OutgoingRecord
from suanli.bus.security import client_options

# Tansu fails fetch_max_wait_ms=0 (ARCHITECTURE §3); a short wait keeps a read to the end quick.
_FETCH_WAIT_MS = 100


def _number(partition: dict[str, int]) -> int:
    return partition["partition"]


class UnknownDeadLetterTopic(LookupError):
    """The broker has no such dead-letter topic."""


class DeadLetterTopics:
    """Reads, replays and purges the dead-letter topics of one cluster (``async with`` or start/stop)."""

    def __init__(
        self, bootstrap: str, *, read_timeout_s: float = 30.0, client_id: str = "suanli-dlq"
    ) -> None:
        self._bootstrap = bootstrap
        self._read_timeout_s = read_timeout_s
        self._client_id = client_id
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None

    async def start(self) -> None:
        """Connect; a second call does nothing."""
        if self._consumer is not None:
            return
        # Never subscribes, so it never joins the group: the group id only scopes the committed offsets
        # that are the purge marks.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=PURGE_GROUP,
            client_id=self._client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=_FETCH_WAIT_MS,
            **client_options(),
        )
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self._bootstrap, client_id=self._client_id, **client_options()
        )
        await admin.start()
        try:
            await consumer.start()
        except BaseException:
            await admin.close()
            raise
        self._consumer, self._admin = consumer, admin

    async def stop(self) -> None:
        """Disconnect; a second call does nothing."""
        consumer, self._consumer = self._consumer, None
        admin, self._admin = self._admin, None
        try:
            if consumer is not None:
                await consumer.stop()
        finally:
            if admin is not None:
                await admin.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _running(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise BusClosedError("DeadLetterTopics is not started")
        return self._consumer

    def _admin_client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            raise BusClosedError("DeadLetterTopics is not started")
        return self._admin

    async def topics(self, prefix: str = "") -> list[str]:
        """Every dead-letter topic of the deployment ``prefix`` (all of them for ``""``), sorted."""
        return dlq_topics(await self._admin_client().list_topics(), prefix)

    async def _layout(self, names: Sequence[str]) -> dict[str, list[TopicPartition]]:
        """The partitions of each of ``names``, from one topic list and one description of them all."""
        admin = self._admin_client()
        known = set(await admin.list_topics())
        for name in names:
            if name not in known:
                raise UnknownDeadLetterTopic(f"no dead-letter topic {name!r} on the broker")
        if not names:
            return {}
        return {
            d["topic"]: [
                TopicPartition(d["topic"], p["partition"]) for p in sorted(d["partitions"], key=_number)
            ]
            for d in await admin.describe_topics(list(names))
        }

    async def _marks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        consumer = self._running()
        marks: dict[TopicPartition, int] = {}
        for tp in partitions:
            committed = await consumer.committed(tp)
            if committed is not None:
                marks[tp] = committed
        return marks

    async def marks(self, topic: str) -> dict[int, int]:
        """The purge mark of each partition of ``topic`` that has one."""
        partitions = (await self._layout([topic]))[topic]
        return {tp.partition: offset for tp, offset in (await self._marks(partitions)).items()}

    async def read(self, topic: str, *, marks: PurgeMarks | None = None) -> list[DeadLetter]:
        """The records of ``topic`` past each partition's purge mark, to its end, in partition order.

        ``marks`` replaces the stored marks (``{}``: read everything still stored).
        """
        partitions = (await self._layout([topic]))[topic]
        if marks is None:
            by_partition = await self._marks(partitions)
        else:
            by_partition = {tp: marks[tp.partition] for tp in partitions if tp.partition in marks}
        letters, _ = await self._read(partitions, by_partition)
        return [letter for tp in partitions for letter in letters[tp]]

    async def summaries(self, names: Sequence[str]) -> list[TopicSummary]:
        """Per topic: its records past the purge marks, by reason, and how many are purged.

        All topics are read at once: one assignment and one offsets lookup, where a lookup per topic
        would wait for a metadata refresh each time.
        """
        layout = await self._layout(names)
        partitions = [tp for name in names for tp in layout[name]]
        marks = await self._marks(partitions)
        letters, starts = await self._read(partitions, marks)
        # Dead-letter topics are neither compacted nor transactional, so offsets are dense: the records
        # behind a mark are the mark minus the first offset still stored.
        return [
            summarise(
                name,
                [letter for tp in layout[name] for letter in letters[tp]],
                sum(max(0, marks.get(tp, 0) - starts[tp]) for tp in layout[name]),
            )
            for name in names
        ]

    async def summary(self, topic: str) -> TopicSummary:
        """`summaries` of one topic."""
        (found,) = await self.summaries([topic])
        return found

    async def _read(
        self, partitions: list[TopicPartition], marks: Mapping[TopicPartition, int]
    ) -> tuple[dict[TopicPartition, list[DeadLetter]], dict[TopicPartition, int]]:
        """The records of ``partitions`` from their marks to their ends, and each one's first offset.

        A partition is read until the record before its end offset has been fetched. On Tansu the end
        offset is the last stored batch's base + 1 (ARCHITECTURE §3), but a fetch returns whole batches,
        so the records after that base arrive with it; and when the mark lies at or past the end offset
        (inside that batch), the read starts at the batch's base and keeps what lies past the mark.
        """
        letters: dict[TopicPartition, list[DeadLetter]] = {tp: [] for tp in partitions}
        if not partitions:
            return letters, {}
        consumer = self._running()
        ends = await consumer.end_offsets(partitions)
        starts = await consumer.beginning_offsets(partitions)
        consumer.assign(partitions)
        first: dict[TopicPartition, int] = {}
        position: dict[TopicPartition, int] = {}
        for tp in partitions:
            first[tp] = max(marks.get(tp, 0), starts[tp])
            position[tp] = min(first[tp], ends[tp] - 1) if ends[tp] > starts[tp] else first[tp]
            consumer.seek(tp, position[tp])
        pending = {tp for tp in partitions if position[tp] < ends[tp]}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._read_timeout_s
        while pending:
            if loop.time() > deadline:
                missing = sum(ends[tp] - position[tp] for tp in pending)
                raise TimeoutError(f"{missing} dead-letter record(s) not read within {self._read_timeout_s}s")
            batches = await consumer.getmany(*pending, timeout_ms=_FETCH_WAIT_MS * 5)
            for tp, records in batches.items():
                for record in records:
                    if record.offset >= first[tp]:
                        letters[tp].append(DeadLetter.from_record(record))
                    position[tp] = record.offset + 1
                if position[tp] >= ends[tp]:
                    pending.discard(tp)
        return letters, starts

    async def purge(self, topic: str, letters: Sequence[DeadLetter]) -> dict[int, int]:
        """Move ``topic``'s marks past ``letters`` (never back); the marks as they now stand."""
        consumer = self._running()
        current = await self.marks(topic)
        wanted = {
            TopicPartition(topic, partition): offset
            for partition, offset in marks_after(letters).items()
            if offset > current.get(partition, 0)
        }
        if wanted:
            consumer.assign(list(wanted))
            await consumer.commit(wanted)
        return {**current, **{tp.partition: offset for tp, offset in wanted.items()}}


async def replay(letters: Sequence[DeadLetter], publisher: EventPublisher) -> int:
    """Republish ``letters`` to their source topics, in order; return once every one is acknowledged.

    Every record is checked before any is sent, so one without a source topic (`NotReplayable`) leaves
    nothing half replayed.
    """
    records = [replay_of(letter) for letter in letters]
    await publisher.publish_many(OutgoingRecord(r.topic, r.key, r.value, r.headers) for r in records)
    return len(records)
