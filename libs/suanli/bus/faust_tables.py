"""A stream processor's tables across a broker that started over (Tansu keeps nothing across a restart).

A worker running across the restart still holds its tables in memory; the changelogs behind them are
gone. Two things then lost the tables for good (in metering: the starts of tasks running across the
restart, so their usage was never charged):

- faust's recovery after the rejoin found that it had read the old changelogs to offsets past the new
  ones' end and stopped the worker (``ConsistencyError``). Started again, the worker rebuilt its tables
  from the empty changelogs. `KeptRecovery` reads such a changelog as one that started over, from its
  beginning (what is there this worker wrote since), and keeps the tables it holds.
- A worker that ran on wrote a record to the new changelog only when the record changed, so a worker
  started later rebuilt only those. `TablesKeeper` looks at the broker and, once it started over, writes
  every record of the partitions this worker owns back to the new changelogs (`write_back`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, MutableMapping, Sequence
from typing import Any

import faust
from aiokafka.partitioner import DefaultPartitioner
from faust.tables.recovery import Recovery

from suanli.bus.watch import BrokerWatch

log = logging.getLogger(__name__)

# Sends of a record written back before the write-back is given up until the next look at the broker.
WRITE_BACK_TRIES = 5


class KeptRecovery(Recovery):
    """faust's recovery, which reads a changelog that ends before the offset it had read to from its start.

    faust keeps, per changelog partition, the offset it has read to, and refuses to recover a partition
    whose end now lies before it. Only a broker that lost the log does that; the worker's tables are then
    the only copy left and stay as they are.
    """

    async def _build_highwaters(self, consumer: Any, tps: Any, destination: Any, title: str) -> None:
        await super()._build_highwaters(consumer, tps, destination, title)
        offsets: MutableMapping[Any, int] = self.active_offsets if title == "active" else self.standby_offsets
        for tp in tps:
            read, end = offsets.get(tp), destination.get(tp)
            if read is not None and end is not None and read > end:
                log.warning(
                    "changelog %s[%d] ends at offset %d, before offset %d read: the broker started over; "
                    "reading it from its start and keeping the table as it is",
                    tp.topic,
                    tp.partition,
                    end,
                    read,
                )
                offsets[tp] = -1


def keep_recovery(app: Any) -> None:
    """Give ``app`` (a faust app whose tables have not started) a `KeptRecovery`."""
    tables = app.tables
    tables._recovery = KeptRecovery(app, tables, beacon=tables.beacon, loop=tables.loop)


class WriteBackError(RuntimeError):
    """Records of a table the broker did not acknowledge in any of the tries."""


async def write_back(
    table: Any, partitions: Collection[int], *, tries: int = WRITE_BACK_TRIES, backoff_s: float = 0.5
) -> int:
    """Send every record of ``table`` whose key falls in ``partitions`` to its changelog again; how many.

    For tables partitioned by the producer's partitioner on raw ``bytes`` keys (``use_partitioner``),
    as the processors' are. Each send is awaited; one that failed (a topic just created can refuse a
    write) is sent again, with the record's value then. A record is read and its send queued with no
    await between, so a batch that writes it meanwhile writes after, and the changelog ends with the
    batch's value; a record deleted meanwhile had its tombstone sent by the batch. Raises
    `WriteBackError` when some record still failed after ``tries``.
    """
    every = list(range(table.partitions))
    partitioner = DefaultPartitioner()
    keys = [key for key in list(table.data.keys()) if partitioner(key, every, every) in partitions]
    left = keys
    for attempt in range(tries):
        if attempt:
            await asyncio.sleep(backoff_s * 2 ** (attempt - 1))
        sends = []
        for key in left:
            value = table.data.get(key)
            if value is not None:
                # faust.Table's send, not a LoggedTable's: awaited here, not by whichever batch comes next.
                sends.append((key, faust.Table.send_changelog(table, None, key, value)))
        results = await asyncio.gather(*(sent for _, sent in sends), return_exceptions=True)
        failed = [
            (key, r) for (key, _), r in zip(sends, results, strict=True) if isinstance(r, BaseException)
        ]
        if not failed:
            return len(keys)
        left = [key for key, _ in failed]
        log.warning(
            "%d records of %s not written back (%r); sending them again", len(left), table.name, failed[0][1]
        )
    raise WriteBackError(f"{len(left)} records of {table.name} not written back after {tries} tries")


async def declare_changelogs(app: Any, tables: Sequence[Any], *, refresh: bool = False) -> None:
    """Declare the tables' changelog topics the producer knows no partitions of, and wait until it does.

    Writing to such a topic fails inside faust (aiokafka's partitioner iterates the topic's partitions,
    None) and stops the worker. faust's declare skips a topic its metadata names, so ``refresh`` first
    asks the broker: after a start-over the metadata still names the old topics until it is refreshed.
    """
    # faust's aiokafka driver: the AIOKafkaProducer behind the app's producer, whose partitioner the table
    # writes use (`Producer.key_partition`).
    client = app.producer._ensure_producer().client
    if refresh:
        await client.force_metadata_update()
    for table in tables:
        topic = table.changelog_topic
        name = topic.get_topic_name()
        if client.cluster.partitions_for_topic(name) is not None:
            continue
        log.warning("changelog %s unknown to the broker (restarted empty?): declared again", name)
        await topic.declare()
        await client._wait_on_metadata(name)


class TablesKeeper:
    """Writes a processor's tables back to their changelogs once the broker started over.

    ``check`` is run by a timer: it looks at the broker (`BrokerWatch`, which also creates the processor's
    missing topics) and, after a start-over, writes back the records of the changelog partitions the
    worker holds actively, as soon as it holds some and is not recovering. The changelog topics are
    declared first: the producer's metadata still lists the old ones, so nothing else would create them.
    ``then``, awaited after each write-back, is what the processor does besides (metering publishes its
    usage windows again).
    """

    def __init__(
        self,
        app: Any,
        tables: Sequence[Any],
        watch: BrokerWatch,
        *,
        tries: int = WRITE_BACK_TRIES,
        backoff_s: float = 0.5,
        then: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._app = app
        self._then = then
        self._tries = tries
        self._backoff_s = backoff_s
        self._tables = tuple(tables)
        self._watch = watch
        self.pending = False
        self.written_back = 0

    async def first_look(self) -> None:
        """Create the processor's topics and note the cluster a later look compares with.

        Before the worker starts; raises what the broker's client raises when it cannot answer.
        """
        await self._watch.look()

    async def check(self) -> int:
        """One look; the records written back by it (0 unless the broker started over)."""
        try:
            if await self._watch.look():
                log.warning("the broker started over: the tables will be written back to their changelogs")
                self.pending = True
        except Exception as exc:  # the broker does not answer: the next look tries again
            log.warning("cannot look at the broker: %r", exc)
            return 0
        if not self.pending or self._app.in_recovery:
            return 0
        owned = {table: self._owned(table) for table in self._tables}
        if not any(owned.values()):
            return 0  # not (re)joined yet
        # Anything failing below leaves it pending: the next check declares, writes back and runs ``then``
        # again (each is harmless twice), rather than the timer's error stopping the worker.
        try:
            await declare_changelogs(self._app, self._tables, refresh=True)
            if self._app.in_recovery:  # a rebalance began meanwhile; its end is the next chance
                return 0
            sent = sum(
                [
                    await write_back(table, partitions, tries=self._tries, backoff_s=self._backoff_s)
                    for table, partitions in owned.items()
                ]
            )
            log.warning("wrote %d table records back to their changelogs after the broker started over", sent)
            if self._then is not None:
                await self._then()
        except Exception as exc:
            log.warning(
                "tables not kept yet after the broker started over (tried again in the next look): %r", exc
            )
            return 0
        self.pending = False
        self.written_back += sent
        return sent

    def _owned(self, table: Any) -> frozenset[int]:
        name = table.changelog_topic.get_topic_name()
        return frozenset(tp.partition for tp in self._app.assignor.assigned_actives() if tp.topic == name)
