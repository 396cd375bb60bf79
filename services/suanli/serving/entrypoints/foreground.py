"""A serving process in the foreground: logging, telemetry, SIGTERM/SIGINT → graceful stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable


def run_foreground(
    name: str, metrics_port: int | None, serve: Callable[[asyncio.Event], Awaitable[None]]
) -> None:
    """Run `serve(stop)` until a signal sets `stop`, with telemetry under `name`."""
    from suanli import telemetry
    from suanli.infra.process import run_until_signalled

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handle = telemetry.setup(name, metrics_port=metrics_port)
    try:
        run_until_signalled(serve)
    finally:
        handle.shutdown()
