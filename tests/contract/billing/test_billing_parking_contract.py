"""Parking port contract: usage kept once per event, found by job or node, oldest first, exactly as parked."""

from __future__ import annotations

from datetime import timedelta

from billing_contract_kit import JAN, Adapter, usage


async def test_parked_usage_is_found_by_its_job_or_its_node(adapter: Adapter) -> None:
    u = usage(1, job="job-1", node="n-1")
    async with adapter.uow.begin() as unit:
        await unit.parking.park(u)
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked(job_id="job-1") == [u]
        assert await unit.parking.parked(node_id="n-1") == [u]
        assert await unit.parking.parked(job_id="job-2") == []
        assert await unit.parking.parked(node_id="n-2") == []
        assert await unit.parking.parked() == []


async def test_usage_comes_back_exactly_as_parked(adapter: Adapter) -> None:
    # Sub-second window bounds and micro-CU-seconds survive the round trip.
    u = usage(1, start=JAN + timedelta(milliseconds=123), seconds=7, h200="0.000001", cpu="12345.678901")
    async with adapter.uow.begin() as unit:
        await unit.parking.park(u)
        [back] = await unit.parking.parked(job_id=u.job_id)
    assert back == u
    assert dict(back.cu_seconds) == dict(u.cu_seconds)
    assert (back.window_start, back.window_end) == (u.window_start, u.window_end)


async def test_parking_the_same_usage_again_keeps_one(adapter: Adapter) -> None:
    u = usage(1)
    for _ in range(2):
        async with adapter.uow.begin() as unit:
            await unit.parking.park(u)
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked(job_id=u.job_id) == [u]


async def test_oldest_parked_first(adapter: Adapter) -> None:
    first, second, third = usage(3), usage(1), usage(2)
    async with adapter.uow.begin() as unit:
        await unit.parking.park(first)
        await unit.parking.park(second)
    async with adapter.uow.begin() as unit:
        await unit.parking.park(third)
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked(job_id="job-1") == [first, second, third]


async def test_unpark_removes_only_that_usage(adapter: Adapter) -> None:
    a, b = usage(1), usage(2)
    async with adapter.uow.begin() as unit:
        await unit.parking.park(a)
        await unit.parking.park(b)
    async with adapter.uow.begin() as unit:
        await unit.parking.unpark(a.event_id)
        await unit.parking.unpark(usage(9).event_id)  # never parked: nothing happens
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked(job_id="job-1") == [b]


async def test_parked_usage_of_several_jobs_oldest_first_and_unparked_at_once(adapter: Adapter) -> None:
    a, b, c = usage(3, job="job-1"), usage(1, job="job-2"), usage(2, job="job-3", node="n-2")
    async with adapter.uow.begin() as unit:
        for u in (a, b, c):
            await unit.parking.park(u)
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked_for_jobs(["job-1", "job-2", "job-9"]) == [a, b]
        assert await unit.parking.parked_for_jobs(set()) == []
        await unit.parking.unpark_many({a.event_id, c.event_id, usage(9).event_id})
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked_for_jobs(["job-1", "job-2", "job-3"]) == [b]
