"""The replica server on a local port: answers timed by the model, precise refusals, a report per interval,
and nothing more once stopped."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

from suanli.clock import SteppingClock
from suanli.contracts.load import ReplicaLoad
from suanli.replica.live import ReplicaIdentity
from suanli.replica.server import ReplicaServer, ReportSink
from suanli.replica.service_time import ReplicaSpeed

# Prefill 10,000 tokens/s, a decode step of 10 ms: 100 context + 6 tokens take 0.01 + 5 x 0.01 s.
SPEED = ReplicaSpeed(10_000.0, 0.008, 0.0, 0.0, kv_capacity_tokens=2_000, max_batch=4)


def replica_server(speed: ReplicaSpeed, sink: ReportSink, **options: Any) -> ReplicaServer:
    """Replica svc-u-r1 in cn-east at `speed`, reporting to `sink`; `options` as ReplicaServer takes them."""
    identity = ReplicaIdentity("svc-u", "svc-u-r1", "cn-east")
    return ReplicaServer(identity, speed, on_report=sink, clock=SteppingClock(), **options)


async def test_serves_refuses_reports_and_goes_quiet_when_stopped() -> None:
    reports: list[ReplicaLoad] = []

    async def sink(load: ReplicaLoad) -> None:
        reports.append(load)

    server = replica_server(SPEED, sink, interval_s=0.05)
    address = await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://{address}/generate"
            started = time.monotonic()
            async with http.post(
                url, json={"context_tokens": 100, "max_tokens": 6, "prompt": "hi"}
            ) as answer:
                assert answer.status == 200
                body = await answer.json()
            took = time.monotonic() - started
            assert body["replica_id"] == "svc-u-r1" and body["generated_tokens"] == 6
            assert body["ttft_s"] == pytest.approx(0.01, abs=0.005)
            assert body["latency_s"] == pytest.approx(0.06, abs=0.01)
            assert took >= 0.05  # answered when the model says, not at once
            async with http.post(url, json={"context_tokens": 1}) as answer:
                assert answer.status == 400
                assert (await answer.json())[
                    "error"
                ] == "max_tokens: required (a whole number of tokens, 1 or more)"
            async with http.post(url, data=b"{not json") as answer:
                assert answer.status == 400
                assert (await answer.json())["error"].startswith("the body is not JSON")
        deadline = time.monotonic() + 5.0
        while not any(r.finished_total == 1 for r in reports) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        last = reports[-1]
        assert (last.address, last.region, last.finished_total, last.generated_tokens_total) == (
            address,
            "cn-east",
            1,
            6,
        )
        assert last.interval_s == 0.05 and last.recent_latency_s == pytest.approx(0.06, abs=0.01)
    finally:
        await server.stop()
    sent = len(reports)
    await asyncio.sleep(0.15)  # three intervals: a stopped replica reports nothing
    assert len(reports) == sent
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.post(f"http://{address}/generate", json={"context_tokens": 1, "max_tokens": 1})


async def test_a_refusal_says_retry_after_and_a_timed_out_request_does_not() -> None:
    async def sink(load: ReplicaLoad) -> None:
        return None

    one_at_a_time = ReplicaSpeed(10_000.0, 0.008, 0.0, 0.0, kv_capacity_tokens=2_000, max_batch=1)
    server = replica_server(one_at_a_time, sink, interval_s=1.0, queue_timeout_s=0.05, max_queued=1)
    address = await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://{address}/generate"

            async def ask(tokens: int) -> tuple[int, str | None, str]:
                async with http.post(url, json={"context_tokens": 100, "max_tokens": tokens}) as answer:
                    return answer.status, answer.headers.get("Retry-After"), await answer.text()

            long = asyncio.create_task(ask(30))  # 0.3 s in the batch of one
            await asyncio.sleep(0.02)
            waiting = asyncio.create_task(ask(2))  # queued behind it past the 0.05 s timeout
            await asyncio.sleep(0.02)
            status, retry_after, text = await ask(2)  # the queue (1) is full: refused at once
            assert (status, retry_after) == (503, "1") and "queue full" in text
            assert (await long)[0] == 200
            status, retry_after, text = await waiting
            assert (status, retry_after) == (503, None) and "over the queue timeout" in text
    finally:
        await server.stop()
