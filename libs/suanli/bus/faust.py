"""faust on the platform's broker: a transport with a chosen fetch wait, faust records for the bus.

Stream processors (metering, routing) use both; the dead-letter path (`suanli.bus.deadletter`) reads a
faust message through `delivered`. `LoggedTable` is a table whose changelog writes can be awaited.

faust's Kafka transport is given a fetch wait the service chooses instead of faust's fixed 1.5 s.

Tansu does not answer a parked fetch when a record arrives, only when the fetch's wait runs out
(measured: a record waited ~320 ms at a 1,500 ms wait, ~21 ms at 100 ms). faust hard-codes
``fetch_max_wait_ms=1500`` for its worker's consumer, so every input of a processor waited that long before
it was handled. Apache Kafka answers a parked fetch as soon as data arrives; there a shorter wait only costs
more empty fetches while the topics are idle.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import aiokafka
import faust
from faust.transport.drivers import aiokafka as driver
from faust.types import AppT
from faust.types.tuples import FutureMessage

from suanli.bus.admin import resolve_replication_factor
from suanli.bus.faust_tables import keep_recovery
from suanli.bus.headers import Headers, header
from suanli.bus.metrics import BusMetrics, lags
from suanli.bus.publisher import ProducerSettings
from suanli.bus.security import kafka_security
from suanli.telemetry.tracing import TRACEPARENT

log = logging.getLogger(__name__)


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: driver.Transport) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Not started yet: the consumer builds its fetcher from this value at start.
        consumer._fetch_max_wait_ms = cast(ShortFetchTransport, transport).fetch_max_wait_ms
        return consumer

    async def seek_to_committed(self) -> Mapping[Any, int]:
        """Every stream partition back to its committed offset, also one with none committed yet.

        After a rebalance faust empties its stream buffers and relies on this seek to fetch again what
        they held. aiokafka's seek skips a partition with no committed offset (or offset 0), so such a
        partition went on from where the fetcher had got to, and the records it had fetched before
        were lost without a trace: in metering, after a restart, a TaskStarted or TaskFinished written
        while no worker ran, and its task was never charged. Those partitions start again from the
        beginning, where the reset policy (``earliest``) starts them; records handled twice are
        harmless (outputs carry deterministic ids, states fold facts idempotently).
        """
        committed = await super().seek_to_committed()
        changelogs = self.app.tables.changelog_topics
        unset = [tp for tp, offset in committed.items() if not offset and tp.topic not in changelogs]
        if unset:
            await self.call_thread(self._ensure_consumer().seek_to_beginning, *unset)
        return cast(Mapping[Any, int], committed)

    def heard_at_ms(self, tp: Any) -> int | None:
        """When the broker last answered a fetch of ``tp`` without an error, records or none.

        Wall clock, ms (aiokafka's ``last_poll_timestamp``); None when it never has, or ``tp`` is not
        assigned.
        """
        consumer = self._consumer
        if consumer is None:
            return None
        try:
            return cast(int | None, consumer.last_poll_timestamp(tp))
        except (AssertionError, KeyError):  # not assigned (or no longer: the consumer's thread moves on)
            return None


class _Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def heard_at_ms(self, tp: Any) -> int | None:
        """See `_ConsumerThread.heard_at_ms` (a read of the consumer thread's state, as ``highwater``)."""
        return cast(_ConsumerThread, self._thread).heard_at_ms(tp)


class ShortFetchTransport(driver.Transport):
    """faust's aiokafka transport whose worker consumer waits ``fetch_max_wait_ms`` per fetch."""

    Consumer = _Consumer

    def __init__(self, app: AppT, *, fetch_max_wait_ms: int) -> None:
        if fetch_max_wait_ms <= 0:
            raise ValueError("Tansu fails fetch_max_wait_ms=0; use a short positive wait")
        super().__init__(list(app.conf.broker_consumer), app)
        self.fetch_max_wait_ms = fetch_max_wait_ms


@dataclass(frozen=True, slots=True)
class DeliveredRecord:
    """A faust message as the bus's dead-letter path reads it (headers as a list of pairs)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def delivered(event: Any) -> DeliveredRecord:
    """Where a faust event's message came from and what it held, for `suanli.bus.deadletter`."""
    m = event.message
    return DeliveredRecord(m.topic, m.partition, m.offset, m.key, m.value, header_list(m.headers))


def header_list(headers: Any) -> Headers:
    """Faust's message headers (a mapping, a list of pairs or None) as a list of pairs."""
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    return [(k, v) for k, v in headers]


# The most already-fetched records a processor handles as one batch unless it chooses otherwise.
BATCH_MAX = 500


async def arrived_batches(
    stream: Any,
    *,
    batch_max: int = BATCH_MAX,
    metrics: BusMetrics | None = None,
    durable: Callable[[], Sequence[Awaitable[object]]] | None = None,
) -> AsyncIterator[list[Any]]:
    """A faust stream's events in batches of what has already arrived; each acked once handled.

    A batch never waits for records still to come. The caller handles a batch before asking for the next;
    only then are its records acknowledged (faust would ack a record, and may commit its offset, as soon
    as the next one is asked for, before its outputs are acknowledged) and, with ``metrics``, counted as
    handled: each record is served in ``suanli_consumer_handle_seconds`` with its batch's handling time,
    which is what it waited for (the handling rate of the bus's consumers, from the same histogram).

    ``durable``, asked after each batch: sends that must be acknowledged before the batch's records are
    (its table writes' changelog records, `LoggedTable.unlogged`). The records are then acknowledged once
    they are, in the background: the next batch does not wait (waiting in line cost metering most of its
    capacity-view freshness under bench/latency.py), and faust commits no offset past an unacknowledged
    record. Should a send fail, its records stay unacknowledged and come again after a restart.
    """
    manual = stream.noack()
    arrived = manual.channel.queue  # records fetched and not yet taken: they join this batch
    events: list[Any] = []
    async for event in manual.events():
        events.append(event)
        if len(events) < batch_max and not arrived.empty():
            continue
        started = time.perf_counter()
        yield events
        elapsed = time.perf_counter() - started
        if metrics is not None:
            for done in events:
                metrics.handled(done.message.topic, elapsed)
        sends = list(durable()) if durable is not None else []
        if sends:
            _ack_once_sent(manual, events, sends)
        else:
            for done in events:
                await manual.ack(done)
        events = []


# Acknowledgements waiting for their batch's sends (kept referenced until they are done).
_ACKING: set[asyncio.Task[None]] = set()


def _ack_once_sent(manual: Any, events: list[Any], sends: list[Awaitable[object]]) -> None:
    async def ack() -> None:
        try:
            await asyncio.gather(*sends)
        except Exception as exc:  # the records come again after a restart; nothing to ack meanwhile
            log.warning("%d records left unacknowledged: a send they depend on failed: %r", len(events), exc)
            return
        for done in events:
            await manual.ack(done)

    task = asyncio.create_task(ack())
    _ACKING.add(task)
    task.add_done_callback(_ACKING.discard)


def traceparent_of(event: Any) -> str | None:
    """The ``traceparent`` header of a faust event's message (the producer's span), if any."""
    return header(header_list(event.message.headers), TRACEPARENT)


def broker_urls(bootstrap: str) -> list[str]:
    """Faust's broker URLs for a Kafka bootstrap list ``host:port[,host:port...]``."""
    return [f"kafka://{h.strip()}" for h in bootstrap.split(",") if h.strip()]


# How often a faust worker reports its consumer lag (the bus consumer reports it after every fetch).
LAG_INTERVAL_S = 2.0


def stream_lags(consumer: Any) -> dict[str, int]:
    """Records between what a faust consumer handed its streams and the partition ends, per topic.

    The ends are the high watermarks fetch responses carry (no ListOffsets request, as for the bus
    consumer); the positions are faust's read offsets, the last record given to a stream (faust has no
    public accessor for them). Partitions not read by a stream (table changelogs, not fetched yet) are
    left out.
    """
    read: Mapping[Any, int | None] = getattr(consumer, "_read_offset", {})

    def position(tp: Any) -> int | None:
        offset = read.get(tp)
        return None if offset is None else offset + 1

    return lags(consumer.assignment(), consumer.highwater, position)


def processor_app(
    group_id: str, bootstrap: str, *, partitions: int, fetch_wait_ms: int, metrics: BusMetrics | None = None
) -> Any:
    """A faust app set up the way the platform's stream processors need on any Kafka-protocol broker.

    Tansu answers ListOffsets(latest) with the base offset of the last batch + 1, and faust's changelog
    recovery (or a processor reading its own output back) trusts it: every record written is its own
    batch. faust's 60 s group timeouts hold a fresh group's first join for half a minute on Tansu and
    leave a crashed worker's partitions idle for a minute; the bus consumer uses 10 s as well. The fetch
    wait is the processor's own (``ShortFetchTransport``), set before anything creates the consumer.
    Its recovery keeps the tables when the broker started over (`suanli.bus.faust_tables`).
    With ``metrics``, a timer reports the worker's consumer lag (`stream_lags`).
    """
    app: Any = faust.App(
        group_id,
        broker=broker_urls(bootstrap),
        broker_credentials=kafka_security().faust_credentials(),
        store="memory://",
        web_enabled=False,
        producer_max_batch_size=1,
        # The bus publisher's limit, not faust's 1 MB: a record another service could publish, or copy
        # to a dead-letter topic, a stream processor can copy too.
        producer_max_request_size=ProducerSettings().max_request_size,
        consumer_auto_offset_reset="earliest",
        # faust's own topics follow the deployment's replication, like ours.
        topic_replication_factor=resolve_replication_factor(),
        topic_partitions=partitions,
        stream_wait_empty=False,
        broker_session_timeout=10.0,
        broker_rebalance_timeout=10.0,
        broker_heartbeat_interval=1.0,
    )
    app.transport = ShortFetchTransport(app, fetch_max_wait_ms=fetch_wait_ms)
    keep_recovery(app)
    if metrics is not None:
        # suanli_consumer_lag for the worker's streams, as every bus consumer serves it.
        @app.timer(LAG_INTERVAL_S, name="suanli.consumer-lag")
        async def report_lag() -> None:
            metrics.set_lags(stream_lags(app.consumer))

    return app


class LoggedTable(faust.Table):
    """A faust table that hands over the sends of its changelog records (`unlogged`).

    faust hands a table write to its producer's buffer and does not wait for it. Its offset commit flushes
    that buffer first, but the flush gives up once 100 ms pass without a send (faust's
    ``ProducerBuffer.flush_atmost``), and a record already taken from the buffer but still queued behind
    its partition's previous batch is in neither buffer. Under load, offsets were committed for records
    whose table writes had not reached the broker; a SIGKILL then lost those writes, and the restarted
    worker, resuming past the records, never applied them again (in metering: a task that ended without
    its start, never charged). A processor acknowledges the records that made writes only once these
    sends are acknowledged (`arrived_batches`' ``durable``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unlogged: list[FutureMessage] = []

    def send_changelog(self, *args: Any, **kwargs: Any) -> FutureMessage:
        """Send as faust does, and keep the send for `unlogged`."""
        sent = super().send_changelog(*args, **kwargs)
        self._unlogged.append(sent)
        return sent

    def unlogged(self) -> list[FutureMessage]:
        """The changelog sends of the writes made since the last call (each resolves once acknowledged)."""
        taken, self._unlogged = self._unlogged, []
        return taken


def logged_table(app: Any, name: str, **kwargs: Any) -> LoggedTable:
    """``app.Table(name, **kwargs)``, as a `LoggedTable`."""
    table = LoggedTable(app, name=name, beacon=app.tables.beacon, **kwargs)
    return cast(LoggedTable, app.tables.add(table))


# A worker that ran this long before crashing is started again; one that crashes sooner exits (a setting
# or a broker it cannot use at start is then visible, not retried forever).
RESTART_AFTER_S = 30.0


def run_worker(
    app: Any,
    loop: asyncio.AbstractEventLoop,
    *,
    loglevel: str = "info",
    restart_after_s: float = RESTART_AFTER_S,
    worker: Callable[..., Any] = faust.Worker,
    clock: Callable[[], float] = time.monotonic,
    restart: Callable[[], None] | None = None,
) -> None:
    """Run faust's worker for ``app`` until it is stopped (SIGINT/SIGTERM: exits 0).

    A worker that crashes after running ``restart_after_s`` starts again in this process (the same
    command line, exec'd: same PID, same log), as a container's restart policy would start it. The case
    this is for: a broker restarted empty (Tansu keeps nothing) loses the processor's own topics, and the
    group leader's faust assignment then fails on their missing metadata (``KafkaError:
    AssertionError()``), which crashes the worker; started again, it creates its topics and rejoins.
    """
    started = clock()
    running = worker(app, loop=loop, loglevel=loglevel)
    try:
        running.execute_from_commandline()
    except SystemExit as exit_:
        crash = getattr(running, "crash_reason", None)
        uptime = clock() - started
        if exit_.code not in (0, None) and crash is not None and uptime >= restart_after_s:
            log.error(
                "%s crashed after %.0f s (%r); starting it again in this process", app.conf.id, uptime, crash
            )
            (restart or _exec_again)()
        raise


def _exec_again() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)
