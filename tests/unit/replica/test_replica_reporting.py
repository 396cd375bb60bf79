"""The report loop of simulated and real replicas: a report that cannot be made or sent is skipped."""

from __future__ import annotations

import asyncio

from suanli.contracts.load import ReplicaLoad
from suanli.replica.reporting import report_every


async def test_a_failing_source_or_sink_skips_that_report_and_the_loop_goes_on() -> None:
    calls: list[int] = []
    sent: list[int] = []
    done = asyncio.Event()

    async def source() -> ReplicaLoad | None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("the server answered something unexpected")
        if len(calls) >= 4:
            done.set()
        return object()  # type: ignore[return-value]

    async def sink(load: ReplicaLoad) -> None:
        sent.append(len(calls))
        if len(calls) == 2:
            raise ConnectionError("the broker is away")

    task = asyncio.create_task(report_every(0.001, source, sink, "svc-r1"))
    await asyncio.wait_for(done.wait(), timeout=5)
    task.cancel()
    assert len(calls) >= 4 and sent[:2] == [2, 3]  # the first made none, the second was lost, on it went
