"""`SchedulerClient`'s retry rule, with an injected clock and sleep: which statuses are tried again,
how long it pauses, and that the deadline bounds all tries together (the calls against a real scheduler
are in tests/integration/scheduling/test_scheduler_client.py)."""

from __future__ import annotations

import random
from typing import Any

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.client import NO_RETRY, Retry, SchedulerClient


def _error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=code.name)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


class Answers:
    """A method answering each call from a script: an error to raise, or the value to return."""

    def __init__(self, *script: Any) -> None:
        self.script = list(script)
        self.timeouts: list[float] = []
        self.requests: list[Any] = []

    async def __call__(self, request: Any, timeout: float) -> Any:
        self.requests.append(request)
        self.timeouts.append(timeout)
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _client(clock: Clock, retry: Retry | None = None, deadline_s: float = 10.0) -> SchedulerClient:
    # A channel is made but never connected: every call here goes to the scripted method.
    return SchedulerClient(
        "127.0.0.1:1",
        retry=retry,
        deadline_s=deadline_s,
        clock=clock,
        sleep=clock.sleep,
        rng=random.Random(3),
    )


def test_pauses_grow_to_the_cap_with_bounded_jitter() -> None:
    retry = Retry(initial_backoff_s=0.2, max_backoff_s=1.0, multiplier=2.0, jitter=0.2)
    rng = random.Random(42)
    pauses = [retry.pause_s(n, rng) for n in range(1, 7)]
    for n, pause in enumerate(pauses, 1):
        base = min(1.0, 0.2 * 2 ** (n - 1))
        assert 0.8 * base <= pause <= 1.2 * base
    assert Retry(jitter=0).pause_s(3, rng) == pytest.approx(0.8)


async def test_unavailable_is_tried_again_with_the_same_request_and_the_time_left() -> None:
    clock = Clock()
    unavailable = _error(grpc.StatusCode.UNAVAILABLE)
    method = Answers(unavailable, unavailable, "job")
    request = pb.GetJobRequest(job_id="j-1")
    async with _client(clock, Retry(jitter=0)) as client:
        assert await client._call(method, request, None) == "job"
    assert method.requests == [request] * 3
    assert clock.pauses == [0.2, 0.4]
    assert method.timeouts == [10.0, pytest.approx(9.8), pytest.approx(9.4)]


@pytest.mark.parametrize(
    "code", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DEADLINE_EXCEEDED]
)
async def test_other_statuses_are_raised_at_once(code: grpc.StatusCode) -> None:
    clock = Clock()
    method = Answers(_error(code), "never")
    async with _client(clock) as client:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client._call(method, pb.GetJobRequest(), None)
    assert raised.value.code() is code and len(method.requests) == 1 and clock.pauses == []


async def test_the_deadline_bounds_all_tries_together() -> None:
    clock = Clock()
    retry = Retry(attempts=100, initial_backoff_s=1.0, max_backoff_s=1.0, jitter=0)
    method = Answers(*[_error(grpc.StatusCode.UNAVAILABLE)] * 100)
    async with _client(clock, retry, 2.5) as client:
        with pytest.raises(grpc.aio.AioRpcError):
            await client._call(method, pb.GetJobRequest(), None)
    # Tries at 0, 1 and 2 s; a pause to 3 s would pass the 2.5 s deadline, so the last error is raised.
    assert len(method.requests) == 3 and clock.now == 2.0


async def test_attempts_bound_the_tries_and_no_retry_means_one() -> None:
    clock = Clock()
    method = Answers(*[_error(grpc.StatusCode.UNAVAILABLE)] * 3)
    async with _client(clock, NO_RETRY) as client:
        with pytest.raises(grpc.aio.AioRpcError):
            await client._call(method, pb.GetJobRequest(), None)
    assert len(method.requests) == 1


async def test_the_channel_reconnects_as_often_as_the_client_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # gRPC spaces a dead channel's connection attempts out to 120 s, failing every call in between at
    # once; the client's channel keeps them within its own retry pauses.
    from suanli.client import channel as channel_module
    from suanli.client import scheduler as scheduler_module

    seen: list[Any] = []

    def opened(address: str, token: str, ca: bytes | None, options: Any = ()) -> Any:
        seen.append(dict(options))
        return channel_module.aio_bearer_channel(address, token, ca, options)

    monkeypatch.setattr(scheduler_module, "aio_bearer_channel", opened)
    client = SchedulerClient("127.0.0.1:1", retry=Retry(initial_backoff_s=0.1, max_backoff_s=0.5))
    await client.close()
    assert seen == [
        {
            "grpc.initial_reconnect_backoff_ms": 100,
            "grpc.min_reconnect_backoff_ms": 100,
            "grpc.max_reconnect_backoff_ms": 500,
        }
    ]
