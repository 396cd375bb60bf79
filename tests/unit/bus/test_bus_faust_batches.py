"""`arrived_batches`: a batch's records are acknowledged only once the sends it depends on are (its table
writes' changelog records), without holding up the next batch; a failed send leaves them unacknowledged.

The stream here is a stand-in with the three things the function uses of a faust stream (``noack()``, its
channel's queue, ``events()`` and ``ack``); the broker-backed path runs in the metering tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from suanli.bus.faust import arrived_batches


@dataclass
class Stream:
    records: list[Any]
    acked: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.channel = SimpleNamespace(queue=asyncio.Queue())

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Any]:
        for record in self.records:
            yield record

    async def ack(self, event: Any) -> None:
        self.acked.append(event)


def event(offset: int) -> Any:
    return SimpleNamespace(offset=offset, message=SimpleNamespace(topic="t"))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_records_are_acked_once_their_sends_are_and_the_next_batch_does_not_wait() -> None:
    first, second = event(0), event(1)
    stream = Stream([first, second])
    sends: list[list[asyncio.Future[None]]] = []

    def durable() -> list[asyncio.Future[None]]:
        sends.append([asyncio.get_running_loop().create_future()])
        return sends[-1]

    batches = arrived_batches(stream, batch_max=1, durable=durable)
    assert await anext(batches) == [first]
    # Asked for the next batch: the first one's sends are taken, and the second comes without waiting.
    assert await anext(batches) == [second]
    await settle()
    assert (len(sends), stream.acked) == (1, [])
    assert await anext(batches, None) is None  # the stream ends; the second batch's sends are taken
    sends[1][0].set_result(None)
    await settle()
    assert stream.acked == [second]  # each batch on its own sends, in whatever order they finish
    sends[0][0].set_result(None)
    await settle()
    assert stream.acked == [second, first]


async def test_a_failed_send_leaves_its_records_unacknowledged_and_no_sends_acks_at_once() -> None:
    failing, plain = event(0), event(1)
    stream = Stream([failing, plain])
    pending: list[asyncio.Future[None]] = []

    def durable() -> list[asyncio.Future[None]]:
        if pending:
            return []  # the second batch wrote nothing
        pending.append(asyncio.get_running_loop().create_future())
        return pending

    batches = arrived_batches(stream, batch_max=1, durable=durable)
    assert await anext(batches) == [failing]
    assert await anext(batches) == [plain]
    pending[0].set_exception(ConnectionError("broker away"))
    assert await anext(batches, None) is None  # the second batch wrote nothing: acked at once
    await settle()
    assert stream.acked == [plain]
