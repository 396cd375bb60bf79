"""TrackingStore contract: an effect and its (group, topic, partition, offset) are recorded atomically."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import pytest

from suanli.eventstore import (
    AlreadyProcessed,
    BatchTrackingStore,
    ClaimedRecord,
    NewEvent,
    TrackingStore,
    Transaction,
    apply_once,
)
from suanli.eventstore.ports import EventStore


async def test_apply_once_runs_the_effect_once_per_offset(store: TrackingStore) -> None:
    runs: list[int] = []

    async def effect(_: Transaction) -> None:
        runs.append(1)

    assert await apply_once(store, "billing", "usage.metered", 0, 7, effect) is True
    assert await apply_once(store, "billing", "usage.metered", 0, 7, effect) is False
    assert runs == [1]
    assert await store.applied("billing", "usage.metered", 0, 7)
    assert await store.applied("billing", "usage.metered", 0, 3)  # earlier offsets of the partition
    assert not await store.applied("billing", "usage.metered", 0, 8)
    assert not await store.applied("billing", "usage.metered", 1, 7)  # other partition
    assert not await store.applied("metering", "usage.metered", 0, 7)  # other group


async def test_tracking_transaction_refuses_an_applied_offset(store: TrackingStore) -> None:
    async with store.tracking_transaction("g", "t", 2, 10):
        pass
    with pytest.raises(AlreadyProcessed) as caught:
        async with store.tracking_transaction("g", "t", 2, 9):
            pytest.fail("the block must not run for an applied offset")
    assert (caught.value.group, caught.value.partition, caught.value.offset) == ("g", 2, 9)


async def test_failed_effect_does_not_record_the_offset(store: TrackingStore) -> None:
    async def failing(_: Transaction) -> None:
        raise RuntimeError("effect failed")

    with pytest.raises(RuntimeError):
        await apply_once(store, "g", "t", 0, 1, failing)
    assert not await store.applied("g", "t", 0, 1)

    async def succeeding(_: Transaction) -> None:
        return None

    assert await apply_once(store, "g", "t", 0, 1, succeeding) is True


async def test_events_appended_in_a_tracking_transaction_commit_with_the_offset(store: EventStore) -> None:
    tracking: TrackingStore = store  # type: ignore[assignment]
    applied_event = NewEvent(uuid.uuid4(), "ChargeRecorded", b"c1")
    async with tracking.tracking_transaction("billing", "usage.metered", 0, 1) as tx:
        await tx.append("tenant-1", 0, [applied_event])
    assert [e.event_id for e in await store.read("tenant-1")] == [applied_event.event_id]

    with pytest.raises(RuntimeError):
        async with tracking.tracking_transaction("billing", "usage.metered", 0, 2) as tx:
            await tx.append("tenant-1", 1, [NewEvent(uuid.uuid4(), "ChargeRecorded", b"c2")])
            raise RuntimeError("crash before commit")
    assert await store.stream_version("tenant-1") == 1
    assert not await tracking.applied("billing", "usage.metered", 0, 2)


async def test_event_id_tracking_survives_offsets_starting_again(store: TrackingStore) -> None:
    # A broker that restarted empty numbers records from 0 again: new events at old offsets still apply,
    # and a redelivered event is still refused whatever offset it comes back at.
    runs: list[str] = []

    def effect(name: str) -> Callable[[Transaction], Awaitable[None]]:
        async def run(_: Transaction) -> None:
            runs.append(name)

        return run

    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    assert await apply_once(store, "billing", "usage.metered", 0, 41, effect("a"), event_id=first)
    assert await apply_once(store, "billing", "usage.metered", 0, 0, effect("b"), event_id=second)
    assert not await apply_once(store, "billing", "usage.metered", 0, 42, effect("c"), event_id=first)
    assert not await apply_once(store, "billing", "usage.metered", 3, 0, effect("d"), event_id=second)
    assert await apply_once(store, "metering", "usage.metered", 0, 41, effect("e"), event_id=first)
    assert runs == ["a", "b", "e"]


async def test_a_tracking_batch_commits_every_claim_and_effect_together(store: EventStore) -> None:
    tracking: BatchTrackingStore = store  # type: ignore[assignment]
    ids = [str(uuid.uuid4()) for _ in range(3)]
    async with tracking.tracking_batch("billing") as batch:
        for offset, event_id in enumerate(ids):
            assert await batch.claim("usage.metered", 0, offset, event_id=event_id)
            version = await store.stream_version("tenant-1") + offset
            await batch.transaction.append(
                "tenant-1", version, [NewEvent(uuid.uuid4(), "ChargeRecorded", b"c")]
            )
        # Claimed earlier in this batch, redelivered at a later offset: refused before the commit too.
        assert not await batch.claim("usage.metered", 0, 5, event_id=ids[0])
        assert await batch.claim("capacity.nodes", 1, 4)
        assert not await batch.claim("capacity.nodes", 1, 3)
    assert await store.stream_version("tenant-1") == 3
    assert await tracking.applied("billing", "usage.metered", 0, 2)
    assert await tracking.applied("billing", "capacity.nodes", 1, 4)
    async with tracking.tracking_batch("billing") as batch:
        assert not await batch.claim("usage.metered", 1, 0, event_id=ids[1])  # applied before: by id
        assert not await batch.claim("capacity.nodes", 1, 4)  # applied before: by offset
        assert await batch.claim("capacity.nodes", 1, 5)


async def test_claim_many_answers_as_claims_one_by_one_would(store: EventStore) -> None:
    tracking: BatchTrackingStore = store  # type: ignore[assignment]
    ids = [str(uuid.uuid4()) for _ in range(3)]
    async with tracking.tracking_batch("billing") as batch:
        assert await batch.claim("usage.metered", 0, 0, event_id=ids[0])
    async with tracking.tracking_batch("billing") as batch:
        answers = await batch.claim_many(
            [
                ClaimedRecord("usage.metered", 0, 1, ids[0]),  # applied in the batch before
                ClaimedRecord("usage.metered", 0, 2, ids[1]),
                ClaimedRecord("usage.metered", 1, 0, ids[1]),  # repeats the one above
                ClaimedRecord("capacity.nodes", 2, 7),  # by offset
                ClaimedRecord("capacity.nodes", 2, 6),  # behind the one above
                ClaimedRecord("usage.metered", 0, 3, ids[2]),
            ]
        )
        assert answers == [False, True, False, True, False, True]
        # Claimed by the statement, so refused to a later claim of the same batch.
        assert not await batch.claim("usage.metered", 0, 9, event_id=ids[2])
    assert await tracking.applied("billing", "usage.metered", 0, 3)
    assert await tracking.applied("billing", "capacity.nodes", 2, 7)
    async with tracking.tracking_batch("billing") as batch:
        assert await batch.claim_many([ClaimedRecord("usage.metered", 0, 4, ids[1])]) == [False]


async def test_a_tracking_batch_that_raises_leaves_no_claim_and_no_effect(store: EventStore) -> None:
    tracking: BatchTrackingStore = store  # type: ignore[assignment]
    event_id = str(uuid.uuid4())
    with pytest.raises(RuntimeError):
        async with tracking.tracking_batch("billing") as batch:
            assert await batch.claim("usage.metered", 0, 0, event_id=event_id)
            assert await batch.claim("capacity.nodes", 0, 9)
            await batch.transaction.append("tenant-1", 0, [NewEvent(uuid.uuid4(), "ChargeRecorded", b"c")])
            raise RuntimeError("one record's effect failed: the batch runs again without it")
    assert await store.stream_version("tenant-1") == 0
    assert not await tracking.applied("billing", "capacity.nodes", 0, 9)
    async with tracking.tracking_batch("billing") as batch:
        assert await batch.claim("usage.metered", 0, 0, event_id=event_id)  # claimable again
