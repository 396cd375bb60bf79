"""`apply_once`: run a consumer's effect exactly once per (group, topic, partition, offset)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from suanli.eventstore.errors import AlreadyProcessed
from suanli.eventstore.ports import TrackingStore, Transaction


async def apply_once(
    store: TrackingStore,
    group: str,
    topic: str,
    partition: int,
    offset: int,
    effect: Callable[[Transaction], Awaitable[None]],
    *,
    event_id: str | None = None,
) -> bool:
    """Run `effect` and record the offset (or event id) in one transaction; False if already applied."""
    try:
        async with store.tracking_transaction(group, topic, partition, offset, event_id=event_id) as tx:
            await effect(tx)
    except AlreadyProcessed:
        return False
    return True
