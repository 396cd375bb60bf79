"""`run_worker`: a faust worker that crashes after running a while starts again in place; a clean stop,
or a crash at start, exits as faust's worker does."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from suanli.bus.faust import run_worker

APP = SimpleNamespace(conf=SimpleNamespace(id="suanli-metering"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def worker_ending(code: int, crash: Exception | None, clock: Clock, ran_s: float) -> Any:
    class Worker:
        def __init__(self, app: Any, *, loop: asyncio.AbstractEventLoop, loglevel: str) -> None:
            self.crash_reason = crash

        def execute_from_commandline(self) -> None:
            clock.now += ran_s
            raise SystemExit(code)

    return Worker


def run(code: int, crash: Exception | None, ran_s: float) -> tuple[list[str], int | str | None]:
    clock, restarts = Clock(), []
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(SystemExit) as exited:
            run_worker(
                APP,
                loop,
                restart_after_s=30.0,
                worker=worker_ending(code, crash, clock, ran_s),
                clock=clock,
                restart=lambda: restarts.append("again"),
            )
    finally:
        loop.close()
    return restarts, exited.value.code


def test_a_crash_after_running_a_while_starts_the_worker_again() -> None:
    broker_restarted = Exception("KafkaError: AssertionError()")
    assert run(1, broker_restarted, ran_s=95.0) == (["again"], 1)


def test_a_crash_soon_after_start_exits_without_starting_again() -> None:
    assert run(1, Exception("cannot reach the broker"), ran_s=5.0) == ([], 1)


def test_a_clean_stop_exits_zero_and_is_not_restarted() -> None:
    assert run(0, None, ran_s=600.0) == ([], 0)


def test_an_exit_without_a_crash_reason_is_not_restarted() -> None:
    # A failure outside the worker's services (e.g. its start raised): faust's own exit stands.
    assert run(1, None, ran_s=600.0) == ([], 1)
