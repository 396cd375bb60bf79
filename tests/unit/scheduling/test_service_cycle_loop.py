"""The cycle loop: a wake-up brings a cycle at once, the interval brings one regardless, a wake the group
commit's own turn consumed brings no second one, and leadership lost ends the loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from _scheduler import Harness, harness

from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask
from suanli.scheduling.service_layer.commands import SubmitJob


def _spec() -> AcceptedSpec:
    return AcceptedSpec(
        "j", "acme", (AcceptedTask("", "t0", cpu_milli=1000, gpu_count=1, gpu_milli=1000),), min_available=1
    )


@contextlib.asynccontextmanager
async def _looping(h: Harness, **kw: Any) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(h.scheduler.loop.run(**kw))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)
    assert condition(), what


async def _ready(**kw: Any) -> Harness:
    h = harness(**kw)
    await h.configure()
    return h


async def test_a_wake_runs_a_cycle_long_before_the_interval() -> None:
    h = await _ready(interval_s=30)
    async with _looping(h):
        # The queue configuration woke it (new queues may let a job in): one cycle, then none unasked.
        await until(lambda: h.scheduler.cycles.count == 1, timeout=2, what="the configuration's cycle")
        await asyncio.sleep(0.05)
        assert h.scheduler.cycles.count == 1 and not h.scheduler.loop.woken
        h.scheduler.loop.wake()
        await until(lambda: h.scheduler.cycles.count == 2, timeout=2, what="a cycle")
        assert not h.scheduler.loop.woken


async def test_the_interval_runs_cycles_without_any_wake() -> None:
    h = await _ready(interval_s=0.05)
    async with _looping(h):
        await until(lambda: h.scheduler.cycles.count >= 3, timeout=5, what="three cycles")


async def test_a_wake_the_eager_turn_consumed_brings_no_second_cycle() -> None:
    h = await _ready(interval_s=30, eager_cycles=True)
    async with _looping(h):
        job = await h.scheduler.commands.handle(SubmitJob(_spec()))
        async with h.scheduler.write_lock.held():  # the drain, its cycle included, is over
            pass
        assert h.projection.jobs[job.id].active  # placed by the group commit's own turn
        assert h.scheduler.cycles.count == 1
        await asyncio.sleep(0.05)  # the loop's waiter resumed on that wake and found it consumed
        assert h.scheduler.cycles.count == 1


async def test_cycles_start_at_least_the_gap_apart_and_the_loop_brings_a_held_back_one() -> None:
    gap = 1.0
    h = await _ready(interval_s=30, eager_cycles=True, min_cycle_gap_s=gap)
    assert await h.scheduler.cycles.run() == 0  # nothing to place: commits nothing, holds nothing back
    first = await h.scheduler.commands.handle(SubmitJob(_spec()))
    placed_first = time.monotonic()
    assert h.projection.jobs[first.id].active  # an idle scheduler places at once
    assert h.scheduler.cycles.count == 2
    second = await h.scheduler.commands.handle(SubmitJob(_spec()))
    async with h.scheduler.write_lock.held():  # the drain is over: its turn held the cycle back
        pass
    assert not h.projection.jobs[second.id].active and h.scheduler.loop.woken
    assert h.scheduler.cycles.count == 2
    async with _looping(h):
        await until(lambda: bool(h.projection.jobs[second.id].active), timeout=gap + 2, what="the held job")
    assert h.scheduler.cycles.count == 3
    assert time.monotonic() - placed_first >= 0.9 * gap  # held back for the gap, not to the interval


async def test_every_turn_runs_before_each_even_when_no_cycle_is_due() -> None:
    h = await _ready(interval_s=30)
    turns: list[int] = []

    async def before_each() -> None:
        turns.append(h.scheduler.cycles.count)

    async with _looping(h, before_each=before_each):
        await until(lambda: h.scheduler.cycles.count == 1, timeout=2, what="a cycle")
        h.scheduler.loop.wake()
        await until(lambda: h.scheduler.cycles.count == 2, timeout=2, what="a second cycle")
    assert turns == [0, 1]  # each before the cycle it preceded


async def test_a_standby_ends_the_loop() -> None:
    leading = [True]
    h = await _ready(interval_s=30, is_leader=lambda: leading[0])
    leading[0] = False
    h.scheduler.loop.wake()
    await asyncio.wait_for(h.scheduler.loop.run(), 2)  # returns: NotLeader
    assert h.scheduler.cycles.count == 0


def _failing_once(error: Exception) -> tuple[Callable[[], Awaitable[None]], list[int]]:
    calls: list[int] = []

    async def before_each() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise error

    return before_each, calls


async def test_a_failure_the_caller_retries_is_retried_after_an_interval() -> None:
    h = await _ready(interval_s=0.05)
    before_each, calls = _failing_once(OSError("connection reset"))
    async with _looping(h, before_each=before_each, retry_if=lambda e: isinstance(e, OSError)):
        await until(lambda: h.scheduler.cycles.count >= 1, timeout=5, what="a cycle after the failure")
    assert len(calls) >= 2


async def test_any_other_failure_ends_the_loop() -> None:
    h = await _ready(interval_s=0.05)
    before_each, _ = _failing_once(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        await asyncio.wait_for(
            h.scheduler.loop.run(before_each=before_each, retry_if=lambda e: isinstance(e, OSError)), 2
        )


async def test_a_failing_eager_turn_leaves_the_wake_for_the_loop() -> None:
    def broken(requests: Any, cycle: int) -> Any:
        raise RuntimeError("placer broke")

    h = await _ready(placer_factory=broken)
    await h.scheduler.commands.handle(SubmitJob(_spec()))
    assert h.scheduler.loop.woken
    async with h.scheduler.write_lock.held():
        await h.scheduler.loop.turn_if_woken()  # logged, not raised: the commands queued behind still run
    assert h.scheduler.loop.woken
