"""Waiting for an outcome with a deadline: how tests (and tools) wait, instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(
    probe: Callable[[], Awaitable[T | None]],
    timeout: float = 20.0,
    what: str = "condition",
    every: float = 0.1,
) -> T:
    """Poll `probe` until it returns something truthy and return it; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(every)
