"""EventStore port contract: appends, reads, optimistic concurrency, unique ids, atomic outbox."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from suanli.eventstore import (
    NO_STREAM,
    ConcurrencyConflict,
    DuplicateEventId,
    EventStore,
    NewEvent,
    OutboxMessage,
    StreamAppend,
)


def event(name: str = "JobSubmitted", payload: bytes = b"p", **metadata: str) -> NewEvent:
    return NewEvent(uuid.uuid4(), name, payload, metadata)


def message(n: int, key: bytes | None = b"job-1") -> OutboxMessage:
    return OutboxMessage("jobs.events", key, "JobSubmitted", f"v{n}".encode(), (("h", str(n).encode()),))


async def test_append_then_read_returns_events_in_version_order(
    store: EventStore, clock_start: datetime
) -> None:
    first, second = event(payload=b"one", tenant="t1"), event("JobQueued", b"two")
    version = await store.append("job-1", NO_STREAM, [first, second])

    assert version == 2
    read = await store.read("job-1")
    assert [(e.stream, e.version, e.event_id, e.event_name, e.payload) for e in read] == [
        ("job-1", 1, first.event_id, "JobSubmitted", b"one"),
        ("job-1", 2, second.event_id, "JobQueued", b"two"),
    ]
    assert dict(read[0].metadata) == {"tenant": "t1"}
    assert read[0].recorded_at == clock_start  # the injected clock, not the wall clock
    assert read[0].position < read[1].position
    assert await store.stream_version("job-1") == 2


async def test_read_after_version_and_unknown_stream(store: EventStore) -> None:
    await store.append("job-1", 0, [event(), event(), event()])
    assert [e.version for e in await store.read("job-1", after_version=1)] == [2, 3]
    assert await store.read("nobody") == []
    assert await store.stream_version("nobody") == 0


async def test_appending_with_current_version_extends_the_stream(store: EventStore) -> None:
    await store.append("job-1", 0, [event()])
    assert await store.append("job-1", 1, [event(), event()]) == 3
    assert [e.version for e in await store.read("job-1")] == [1, 2, 3]


async def test_read_all_follows_global_position_across_streams(store: EventStore) -> None:
    a1, b1, a2, c1 = event(), event(), event(), event()
    await store.append("a", 0, [a1])
    await store.append("b", 0, [b1])
    await store.append("a", 1, [a2])
    await store.append("c", 0, [c1])

    every = await store.read_all()
    assert [e.event_id for e in every] == [a1.event_id, b1.event_id, a2.event_id, c1.event_id]
    assert [e.position for e in every] == sorted(e.position for e in every)
    after_first = await store.read_all(after_position=every[0].position, limit=2)
    assert [e.event_id for e in after_first] == [b1.event_id, a2.event_id]


async def test_wrong_expected_version_raises_conflict_and_writes_nothing(store: EventStore) -> None:
    await store.append("job-1", 0, [event(), event()])
    with pytest.raises(ConcurrencyConflict) as caught:
        await store.append("job-1", 1, [event()], outbox=[message(1)])
    assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("job-1", 1, 2)
    with pytest.raises(ConcurrencyConflict):
        await store.append("job-1", 5, [event()])
    with pytest.raises(ConcurrencyConflict):
        await store.append("job-1", NO_STREAM, [event()])
    assert len(await store.read("job-1")) == 2
    assert await store.pending_outbox() == []  # the conflicting append's outbox row is not there


async def test_concurrent_appends_at_the_same_version_exactly_one_wins(store: EventStore) -> None:
    contenders = [event(payload=str(i).encode()) for i in range(5)]
    results = await asyncio.gather(
        *(store.append("job-1", 0, [e], outbox=[message(i)]) for i, e in enumerate(contenders)),
        return_exceptions=True,
    )
    winners = [r for r in results if r == 1]
    conflicts = [r for r in results if isinstance(r, ConcurrencyConflict)]
    assert (len(winners), len(conflicts)) == (1, 4)
    assert all(c.actual == 1 for c in conflicts)
    stored = await store.read("job-1")
    assert len(stored) == 1
    assert len(await store.pending_outbox()) == 1


async def test_duplicate_event_id_is_rejected_across_streams(store: EventStore) -> None:
    original = event()
    await store.append("a", 0, [original])
    with pytest.raises(DuplicateEventId) as caught:
        await store.append("b", 0, [event(), original], outbox=[message(1)])
    assert caught.value.event_ids == (original.event_id,)
    assert await store.read("b") == []
    assert await store.pending_outbox() == []


async def test_duplicate_event_id_within_one_append_is_rejected(store: EventStore) -> None:
    repeated = event()
    with pytest.raises(DuplicateEventId):
        await store.append("a", 0, [repeated, repeated])
    assert await store.read_all() == []


async def test_negative_expected_version_is_a_programming_error(store: EventStore) -> None:
    with pytest.raises(ValueError):
        await store.append("a", -1, [event()])


async def test_outbox_rows_are_recorded_with_the_events_in_order(store: EventStore) -> None:
    await store.append("job-1", 0, [event()], outbox=[message(1), message(2, key=None)])
    await store.append("job-2", 0, [event()], outbox=[message(3, key=b"job-2")])

    pending = await store.pending_outbox()
    assert [(r.topic, r.key, r.event_name, r.value, r.headers) for r in pending] == [
        ("jobs.events", b"job-1", "JobSubmitted", b"v1", (("h", b"1"),)),
        ("jobs.events", None, "JobSubmitted", b"v2", (("h", b"2"),)),
        ("jobs.events", b"job-2", "JobSubmitted", b"v3", (("h", b"3"),)),
    ]
    assert [r.id for r in pending] == sorted(r.id for r in pending)
    assert len(await store.pending_outbox(limit=2)) == 2


async def test_outbox_rows_keep_their_own_headers_in_one_append(store: EventStore) -> None:
    none = OutboxMessage("t", None, "A", b"a")
    three = OutboxMessage("t", b"k", "B", b"b", (("x", b"1"), ("y", b""), ("x", b"2")))
    one = OutboxMessage("u", b"k", "C", b"c", (("z", b"\x00\xff"),))
    await store.append("s", 0, [event(), event()], outbox=[none, three, one])
    await store.append("s", 2, [], outbox=[one])  # outbox rows alone, no events
    pending = await store.pending_outbox()
    assert [(r.topic, r.key, r.event_name, r.value, r.headers) for r in pending] == [
        ("t", None, "A", b"a", ()),
        ("t", b"k", "B", b"b", (("x", b"1"), ("y", b""), ("x", b"2"))),
        ("u", b"k", "C", b"c", (("z", b"\x00\xff"),)),
        ("u", b"k", "C", b"c", (("z", b"\x00\xff"),)),
    ]
    assert await store.stream_version("s") == 2


async def test_for_event_carries_id_and_name_headers(store: EventStore) -> None:
    submitted = event()
    outbox = [OutboxMessage.for_event("jobs.events", b"k", submitted)]
    await store.append("job-1", 0, [submitted], outbox=outbox)
    (row,) = await store.pending_outbox()
    assert dict(row.headers) == {"event-id": str(submitted.event_id).encode(), "event-name": b"JobSubmitted"}
    assert row.value == submitted.payload


async def test_outbox_row_keeps_the_trace_context_it_was_appended_in(store: EventStore) -> None:
    # A private provider: the store reads the current span, whichever provider made it.
    span = TracerProvider().get_tracer("contract").start_span("command")
    given = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    with trace.use_span(span, end_on_exit=True):
        await store.append(
            "job-1",
            0,
            [event(), event()],
            outbox=[message(1), OutboxMessage("jobs.events", b"k", "JobSubmitted", b"v", traceparent=given)],
        )
    await store.append("job-2", 0, [event()], outbox=[message(2)])

    first, second, untraced = await store.pending_outbox()
    ctx = span.get_span_context()
    assert first.traceparent is not None
    assert first.traceparent.split("-")[:3] == ["00", f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]
    assert second.traceparent == given
    assert untraced.traceparent is None
    assert first.headers == (("h", b"1"),)  # the context is a column of its own, not a stored header


APPENDING = pytest.mark.parametrize("appending", [False, True], ids=["plain", "appending"])


@APPENDING
async def test_transaction_commits_several_appends_together(store: EventStore, appending: bool) -> None:
    async with store.transaction(appending=appending) as tx:
        assert await tx.append("a", 0, [event()], outbox=[message(1)]) == 1
        assert await tx.append("a", 1, [event()]) == 2  # sees its own uncommitted append
        await tx.append("b", 0, [event()], outbox=[message(2)])
    assert [e.stream for e in await store.read_all()] == ["a", "a", "b"]
    assert len(await store.pending_outbox()) == 2


@APPENDING
async def test_transaction_that_raises_leaves_nothing(store: EventStore, appending: bool) -> None:
    with pytest.raises(RuntimeError):
        async with store.transaction(appending=appending) as tx:
            await tx.append("a", 0, [event()], outbox=[message(1)])
            raise RuntimeError("decision failed after the append")
    assert await store.read_all() == []
    assert await store.pending_outbox() == []
    # The connection went back clean: the next unit of work commits normally.
    await store.append("b", 0, [event()])
    assert [e.stream for e in await store.read_all()] == ["b"]


@APPENDING
async def test_conflict_inside_a_transaction_keeps_the_transaction_usable(
    store: EventStore, appending: bool
) -> None:
    await store.append("a", 0, [event()])
    async with store.transaction(appending=appending) as tx:
        with pytest.raises(ConcurrencyConflict):
            await tx.append("a", 0, [event()])
        await tx.append("a", 1, [event()])
    assert await store.stream_version("a") == 2


async def test_append_many_writes_every_stream_in_the_order_given(store: EventStore) -> None:
    await store.append("b", 0, [event()])
    a1, a2, b2, c1 = event(payload=b"a1"), event(payload=b"a2"), event(payload=b"b2"), event(payload=b"c1")
    async with store.transaction() as tx:
        versions = await tx.append_many(
            [
                StreamAppend("a", 0, [a1, a2], [message(1), message(2)]),
                StreamAppend("b", 1, [b2]),
                StreamAppend("c", 0, [c1], [message(3)]),
            ]
        )
    assert versions == [2, 2, 1]
    after_b1 = (await store.read("b"))[0].position
    new = await store.read_all(after_b1)
    assert [(e.stream, e.version, e.payload) for e in new] == [
        ("a", 1, b"a1"),
        ("a", 2, b"a2"),
        ("b", 2, b"b2"),
        ("c", 1, b"c1"),
    ]
    assert [r.value for r in await store.pending_outbox()] == [b"v1", b"v2", b"v3"]


@APPENDING
@pytest.mark.parametrize("problem", ["stale version", "id recorded before", "id twice in the batch"])
async def test_append_many_is_all_or_nothing(store: EventStore, problem: str, appending: bool) -> None:
    recorded = event()
    await store.append("b", 0, [recorded])
    fresh = event()
    second = {
        "stale version": StreamAppend("b", 0, [event()]),
        "id recorded before": StreamAppend("c", 0, [recorded]),
        "id twice in the batch": StreamAppend("c", 0, [fresh]),
    }[problem]
    expected = ConcurrencyConflict if problem == "stale version" else DuplicateEventId
    async with store.transaction(appending=appending) as tx:
        with pytest.raises(expected):
            await tx.append_many([StreamAppend("a", 0, [fresh], [message(1)]), second])
        # The transaction is still usable after the refusal.
        assert await tx.append("d", 0, [event()]) == 1
    assert [e.stream for e in await store.read_all()] == ["b", "d"]
    assert await store.pending_outbox() == []


async def test_append_many_refuses_a_stream_twice(store: EventStore) -> None:
    async with store.transaction() as tx:
        with pytest.raises(ValueError, match="each stream once"):
            await tx.append_many([StreamAppend("a", 0, [event()]), StreamAppend("a", 1, [event()])])
    assert await store.read_all() == []
