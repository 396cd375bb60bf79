"""The relay over each adapter's OutboxFeed, with a recording sink: order, marking, wake-up, retry, lease."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from contract_adapters import Adapter

from suanli.eventstore import NewEvent, OutboxMessage, OutboxRecord, OutboxRelay, RecordingOutboxSink
from suanli.eventstore.relay_metrics import OutboxProgress
from suanli.infra.polling import until

DEADLINE_S = 10.0


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    await until(check, DEADLINE_S, what, every=0.01)


async def write(adapter: Adapter, stream: str, count: int, key: bytes) -> list[NewEvent]:
    events = [NewEvent(uuid.uuid4(), "JobQueued", f"{stream}-{i}".encode()) for i in range(count)]
    version = await adapter.store.stream_version(stream)
    await adapter.store.append(
        stream, version, events, outbox=[OutboxMessage.for_event("jobs.events", key, e) for e in events]
    )
    return events


def values(records: Sequence[OutboxRecord]) -> list[bytes]:
    return [r.value for r in records]


async def test_relay_publishes_every_row_in_order_and_marks_it(adapter: Adapter) -> None:
    a = await write(adapter, "a", 7, b"a")
    b = await write(adapter, "b", 5, b"b")
    sink = RecordingOutboxSink()
    async with OutboxRelay(adapter.feed, sink, batch_size=3, poll_interval=30):

        async def all_marked() -> bool:
            return len(sink.records) == 12 and await adapter.store.pending_outbox() == []

        await eventually(all_marked, "12 rows published and marked")
    assert values(sink.records) == [e.payload for e in a + b]
    assert [r.id for r in sink.records] == sorted(r.id for r in sink.records)


async def test_relay_wakes_on_commit_without_waiting_for_the_poll(adapter: Adapter) -> None:
    sink = RecordingOutboxSink()
    # A 60 s poll: only the NOTIFY (or the in-memory signal) can deliver within the deadline.
    async with OutboxRelay(adapter.feed, sink, poll_interval=60) as relay:

        async def looked_at_empty_outbox() -> bool:
            return relay.polls >= 1

        await eventually(looked_at_empty_outbox, "relay idle")
        written = await write(adapter, "late", 2, b"late")

        async def delivered() -> bool:
            return len(sink.records) == 2

        await eventually(delivered, "rows written after the relay went idle")
    assert values(sink.records) == [e.payload for e in written]


async def test_relay_retries_a_failed_batch_without_losing_rows(adapter: Adapter) -> None:
    written = await write(adapter, "a", 4, b"a")
    sink = RecordingOutboxSink()
    sink.fail_next = ConnectionError("broker unavailable")
    async with OutboxRelay(adapter.feed, sink, poll_interval=30, min_backoff=0.01) as relay:

        async def all_marked() -> bool:
            return len(sink.records) == 4 and await adapter.store.pending_outbox() == []

        await eventually(all_marked, "rows published after the failure")
    assert relay.failures == 1
    assert values(sink.records) == [e.payload for e in written]


async def test_only_one_relay_holds_the_lease(adapter: Adapter) -> None:
    entered: list[str] = []
    async with adapter.feed.lease():
        entered.append("first")
        second = asyncio.create_task(_take_lease(adapter, entered))
        await asyncio.sleep(0.1)
        assert entered == ["first"]  # the standby is still waiting
    await asyncio.wait_for(second, DEADLINE_S)
    assert entered == ["first", "second"]


async def _take_lease(adapter: Adapter, entered: list[str]) -> None:
    async with adapter.feed.lease():
        entered.append("second")


async def test_stop_is_graceful_and_a_new_relay_resumes(adapter: Adapter) -> None:
    await write(adapter, "a", 3, b"a")
    sink = RecordingOutboxSink()
    relay = OutboxRelay(adapter.feed, sink, poll_interval=30)
    await relay.start()

    async def first_done() -> bool:
        return await adapter.store.pending_outbox() == []

    await eventually(first_done, "first rows")
    await relay.stop()
    await write(adapter, "a", 2, b"a")
    assert len(await adapter.store.pending_outbox()) == 2  # nothing publishes while stopped
    async with OutboxRelay(adapter.feed, sink, poll_interval=30):
        await eventually(first_done, "rows written while stopped")
    assert len(sink.records) == 5


async def test_two_relays_publish_each_row_once_in_order(adapter: Adapter) -> None:
    sink = RecordingOutboxSink()  # shared: order across both relays is what consumers would see
    async with (
        OutboxRelay(adapter.feed, sink, batch_size=4, poll_interval=30),
        OutboxRelay(adapter.feed, sink, batch_size=4, poll_interval=30),
    ):
        written = await write(adapter, "a", 10, b"a") + await write(adapter, "b", 10, b"b")

        async def all_marked() -> bool:
            return len(sink.records) >= 20 and await adapter.store.pending_outbox() == []

        await eventually(all_marked, "20 rows published by whichever relay leads")
    assert values(sink.records) == [e.payload for e in written]


class HeldSink(RecordingOutboxSink):
    """Holds every batch until released, as a broker that does not acknowledge."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()
        self.released = asyncio.Event()

    async def publish_batch(self, records: Sequence[OutboxRecord]) -> None:
        self.holding.set()
        await self.released.wait()
        await super().publish_batch(records)


async def test_relay_progress_shows_waiting_rows_and_their_age_until_published(adapter: Adapter) -> None:
    await write(adapter, "progress", 3, b"p")
    progress = OutboxProgress()
    sink = HeldSink()
    async with OutboxRelay(adapter.feed, sink, batch_size=2, poll_interval=30, progress=progress):
        await asyncio.wait_for(sink.holding.wait(), DEADLINE_S)
        # The first batch hangs in the sink: what the gauges show while the broker does not answer.
        assert progress.pending == 2  # the batch size: at least that many wait
        assert progress.oldest is not None
        later = progress.oldest + timedelta(seconds=90)
        assert progress.age_s(later) == 90.0
        sink.released.set()

        async def caught_up() -> bool:
            published = len(sink.records) == 3 and await adapter.store.pending_outbox() == []
            return published and progress.oldest is None

        await eventually(caught_up, "every row published and the progress caught up")
    assert progress.pending == 0
    assert progress.age_s(later) == 0.0
